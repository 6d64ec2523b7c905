"""Offline skill synthesis: steps from resolutions, merged, ordered and cited; pitfalls,
decision branches, situations and names from the members."""

from ultron.heuristics.skill_synthesis import MAX_STEPS, synthesize, topic_from
from ultron.heuristics.skill_text import generalize, near_duplicate, split_actions, tokens


def mem(i, content, context="", resolution="", kind="error"):
    return {"id": f"m{i}", "memory_type": kind, "content": content, "context": context, "resolution": resolution}


PANDAS = [
    mem(1, "ModuleNotFoundError: No module named 'pandas'", "nightly report in the app container",
        "Add pandas to requirements.txt. Rebuild the image with `docker build -t app .`"),
    mem(2, "ImportError: pandas is missing", "CI job running tests inside Docker",
        "pip install pandas inside the Dockerfile, then rebuild the image."),
    mem(3, "worker crashed: no module named pandas", "docker compose worker service",
        "Added pandas to requirements.txt and rebuilt the container."),
    mem(4, "Airflow task failed with ModuleNotFoundError for pandas", "Airflow task in a Docker operator",
        "Rebuild the image with `docker build --no-cache -t app .` after adding pandas to requirements.txt"),
    mem(5, "Installed pandas on the host instead of the image", "local Docker setup with a virtualenv",
        "User: install it in the image, not on the host. Then: Bash `docker compose build worker`", "correction"),
]


def step(skill, fragment):
    return next(s for s in skill["steps"] if fragment in s["text"])


def test_steps_come_from_resolutions_and_cite_their_memories():
    skill = synthesize("pandas missing in docker images", PANDAS)
    texts = [s["text"] for s in skill["steps"]]
    assert "Add pandas to requirements.txt" in texts
    assert step(skill, "Add pandas")["evidence"] == ["m1", "m3"]        # "Added ... and rebuilt" merged in
    assert set(step(skill, "Rebuild the image")["evidence"]) == {"m1", "m2", "m4"}
    # what only one of five memories did is not on the main path: it is a decision branch
    assert "Bash `docker compose build worker`" not in texts
    assert "Install it in the image, not on the host" in [b["action"] for b in skill["branches"]]
    cited = {e for item in skill["steps"] + skill["branches"] for e in item["evidence"]}
    assert cited == {"m1", "m2", "m3", "m4", "m5"}
    # each step's words are in a memory it cites
    for s in skill["steps"]:
        assert any(tokens(s["text"]) <= tokens(" ".join(PANDAS[int(e[1]) - 1].values())) for e in s["evidence"]), s


def test_steps_follow_the_order_the_resolutions_do_them():
    skill = synthesize("pandas", PANDAS)
    texts = [s["text"] for s in skill["steps"]]
    assert texts.index("Add pandas to requirements.txt") < texts.index("Rebuild the image with `docker build -t app .`")
    # what is done most comes first where the resolutions do not order it
    assert texts[0] == "Add pandas to requirements.txt"


def test_near_duplicate_steps_merge_but_different_actions_on_the_same_thing_do_not():
    members = [mem(i, f"error {i}", c, r) for i, (c, r) in enumerate([
        ("project setup", "read_file requirements.txt; write_file requirements.txt"),
        ("project setup", "1. read_file: requirements.txt\n2. write_file: requirements.txt"),
        ("numpy missing from the venv", "Install numpy in the venv"),
        ("two numpy versions in the venv", "Uninstall numpy from the venv")], 1)]
    skill = synthesize("venv", members)
    texts = [s["text"] for s in skill["steps"]]
    assert texts[:2] == ["read_file requirements.txt", "write_file requirements.txt"]
    assert [s["evidence"] for s in skill["steps"][:2]] == [["m1", "m2"], ["m1", "m2"]]
    actions = [b["action"] for b in skill["branches"]]
    assert "Install numpy in the venv" in actions and "Uninstall numpy from the venv" in actions


def test_variants_that_differ_in_a_word_are_shown_as_one():
    members = [mem(i, f"ModuleNotFoundError: No module named '{m}'", f"the {m} service",
                   f"The image lacks the {m} module. Worked: `pip install {m}`") for i, m in
               enumerate(["redis", "flask", "numpy", "yaml"], 1)]
    skill = synthesize("missing modules", members)
    [lacks] = [p for p in skill["pitfalls"] if "lacks" in p["text"]]
    assert lacks["text"] == "The image lacks the redis/flask/numpy/… module"
    assert lacks["evidence"] == ["m1", "m2", "m3", "m4"]
    assert generalize(["read_file: a.txt", "read_file a.txt"]) == "read_file: a.txt"


def test_pitfalls_come_from_errors_causes_and_corrections():
    skill = synthesize("pandas", PANDAS)
    texts = [p["text"] for p in skill["pitfalls"]]
    assert texts[0] == "Avoid: Installed pandas on the host instead of the image"
    assert "ModuleNotFoundError: No module named 'pandas'" in texts
    cause = synthesize("x", [mem(1, "boom", "", "The build failed because the cache was stale. Run `make clean`.")])
    assert cause["pitfalls"][0] == {"text": "The build failed because the cache was stale", "evidence": ["m1"]}
    assert cause["steps"] == [{"text": "Run `make clean`", "evidence": ["m1"]}]


def test_decision_branches_come_from_differing_contexts():
    skill = synthesize("pandas", PANDAS)
    branches = {b["condition"]: b for b in skill["branches"]}
    assert branches["CI job running tests inside Docker"]["action"] == "pip install pandas inside the Dockerfile"
    assert branches["local Docker setup with a virtualenv"]["evidence"] == ["m5"]
    # the main path (done by half the members or more) is not a branch
    assert all("Rebuild the image" not in b["action"] for b in skill["branches"])
    same = [mem(i, "boom", "the same context everywhere", "Run `fix.sh`") for i in range(1, 5)]
    assert synthesize("x", same)["branches"] == []


def test_contexts_that_read_alike_make_one_branch():
    members = [mem(i, "crash", f"The {svc} container crashes on start", r) for i, (svc, r) in enumerate(
        [("api", "Edit requirements.txt"), ("etl", "Edit requirements.txt"), ("web", "Fix the Dockerfile CMD"),
         ("db", "Rebuild the image"), ("cron", "Rebuild the image")], 1)]
    branches = synthesize("containers", members)["branches"]
    [api] = [b for b in branches if "requirements" in b["action"]]
    assert api["condition"] == "the api/etl container crashes on start" and api["evidence"] == ["m1", "m2"]


def test_when_to_use_name_and_description():
    skill = synthesize("pandas missing in docker images", PANDAS)
    assert skill["name"] == "Pandas missing in docker images"
    assert skill["when_to_use"][0] == "The task involves pandas missing in docker images."
    assert skill["when_to_use"][1] == "You run into: ModuleNotFoundError: No module named 'pandas'"
    assert "5 related memories" in skill["description"] and "Rebuild the image" in skill["description"]
    assert len(skill["description"]) <= 300


def test_a_missing_topic_comes_from_the_members():
    assert topic_from(PANDAS).startswith("pandas")
    assert synthesize("", PANDAS)["name"].lower().startswith("pandas")


def test_steps_are_capped_and_deduplicated_at_scale():
    members = [mem(i, f"error {i % 7}", f"context {i % 3}", f"Run `step{i % 20}.sh`. Restart service{i % 20}.")
               for i in range(50)]
    skill = synthesize("scale", members)
    texts = [s["text"] for s in skill["steps"]]
    assert len(texts) == MAX_STEPS and len(set(texts)) == len(texts)
    assert all(len(s["evidence"]) >= 2 for s in skill["steps"])


def test_bad_members_do_not_crash():
    members = [{"id": "a", "memory_type": None, "content": None, "context": None, "resolution": None},
               {"id": "b", "memory_type": "error", "content": "", "context": "", "resolution": "???"},
               {"content": "no id"}]
    skill = synthesize("", members)
    assert skill["steps"] == [] and skill["name"]
    assert synthesize("x", [])["steps"] == []


def test_split_actions_keeps_code_whole_and_drops_labels():
    units = split_actions("The image lacked pandas. Worked: Bash `pip install a; echo ok` -> Successfully installed."
                          "\n1. Read x3: a.toml, b.toml\n… (+3 more steps)")
    assert units == ["The image lacked pandas", "Bash `pip install a; echo ok`", "Read x3: a.toml, b.toml"]
    assert split_actions("Add x, then rebuild the image; restart it") == ["Add x", "rebuild the image", "restart it"]
    assert near_duplicate(tokens("Rebuild the image"), tokens("rebuild the docker image"))
    assert not near_duplicate(tokens("Rebuild the image"), tokens("Restart the worker"))
