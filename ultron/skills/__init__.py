"""Skill Hub: knowledge clusters crystallised into versioned SKILL.md skills.

``service.SkillService`` runs evolution, search and reads; ``synthesis`` is the offline
synthesis, ``gate`` the quality gate, ``render`` the SKILL.md/_meta.json files,
``versioning`` versions and slugs, ``draft`` the in-between structure and ``text`` the
word tools they share. SQL lives in ``ultron.db.skills``.
"""
