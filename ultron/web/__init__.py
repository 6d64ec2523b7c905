"""The memory browser: server-rendered pages at ``/ui`` for people to see, correct and
remove what Ultron learned.

Plain HTML forms and Jinja2 templates, one small stylesheet and one small script, all
served by Ultron itself (no CDN, no node build): it works offline, with the keyboard, and
without JavaScript. Pages read through :class:`ultron.browse.Browser` and write through
the SDK, so the browser can do nothing the API could not.
"""

from ultron.web.pages import mount_browser

__all__ = ["mount_browser"]
