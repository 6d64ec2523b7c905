"""A family of error fixes with one symptom becomes a skill an agent can follow."""

from ultron.heuristics.skill_synthesis import synthesize
from ultron.heuristics.checker import check_skill

CASES = [
    ("api", "flask", "requirements.txt lists gunicorn only.", "Add flask to requirements.txt and rebuild the image."),
    ("etl", "numpy", "The build installs into /opt/venv but CMD runs the system python.",
     "Put the venv first on PATH in the Dockerfile (ENV PATH=/opt/venv/bin:$PATH) and rebuild the image."),
    ("cfg", "yaml", "requirements.txt asks for 'yaml', but the import comes from PyYAML.",
     "Replace yaml with PyYAML==6.0.2 in requirements.txt and rebuild the image."),
    ("web", "requests", "The multi-stage Dockerfile never copies /install into the final stage.",
     "Copy the packages into the final stage (COPY --from=builder /install /usr/local)."),
]


def members(cases=CASES):
    return [{"id": f"m{i}", "memory_type": "error", "content": cause,
             "context": f"Error: ModuleNotFoundError: No module named '{mod}' Task: The {svc} container crashes on "
                        f"start. Can you fix it?",
             "resolution": f"{fix}\n1. Write requirements.txt: `{mod}==1.0`\n2. docker build -t {svc} . && "
                           f"docker run --rm {svc}"}
            for i, (svc, mod, cause, fix) in enumerate(cases, 1)]


def test_the_title_and_situations_name_the_symptom_not_the_topic_terms():
    skill = synthesize("docker · requirements.txt", members())
    assert skill["name"] == "Fix ModuleNotFoundError when a container crashes on start"
    assert skill["when_to_use"] == ["You see `ModuleNotFoundError: No module named '…'`.",
                                    "A container crashes on start."]
    assert "api" not in skill["name"] and "etl" not in " ".join(skill["when_to_use"])


def test_each_branch_runs_from_a_checkable_cause_to_its_fix():
    skill = synthesize("docker", members())
    branches = {b["condition"]: b for b in skill["branches"]}
    assert branches["requirements.txt lists gunicorn only"]["action"] == \
        "Add flask to requirements.txt and rebuild the image."
    # one case's version pin is not part of the lesson
    assert branches["requirements.txt asks for 'yaml', but the import comes from PyYAML"]["action"] == \
        "Replace yaml with PyYAML in requirements.txt and rebuild the image."
    assert branches["the build installs into /opt/venv but CMD runs the system python"]["evidence"] == ["m2"]
    # every pitfall is something that goes wrong, with the sign it gives
    assert all("(sign: `ModuleNotFoundError" in p["text"] for p in skill["pitfalls"])


def test_steps_are_what_the_cases_share_with_one_case_names_generalised():
    skill = synthesize("docker", members())
    texts = [s["text"] for s in skill["steps"]]
    assert texts[0] == "Note which name the error reports: `ModuleNotFoundError: No module named '…'`."
    assert texts[1].startswith("Check requirements.txt and Dockerfile against the causes")
    assert "Confirm the fix: `docker build -t <name> . && docker run --rm <name>`" in texts
    assert all(len(s["evidence"]) >= 2 for s in skill["steps"])
    assert check_skill(skill["name"], [(s["text"], s["evidence"]) for s in skill["steps"]],
                       [b["condition"] for b in skill["branches"]], 4) == []


def test_the_description_names_whole_fixes():
    skill = synthesize("docker", members())
    assert skill["description"].startswith("Fix ModuleNotFoundError when a container crashes on start. Symptom: ")
    assert "Add flask to requirements.txt and rebuild the image" in skill["description"]
    assert "…" not in skill["description"].split("Known fixes:")[1] and len(skill["description"]) <= 600


def test_an_unrelated_error_is_not_mixed_in():
    other = {"id": "m9", "memory_type": "error", "content": "The token lacks the repo scope.",
             "context": "Error: PermissionError: 403 Task: Push the release tag.", "resolution": "Add the repo scope."}
    skill = synthesize("docker", members() + [other])
    cited = {e for part in ("steps", "pitfalls", "branches") for item in skill[part] for e in item["evidence"]}
    assert "m9" not in cited and "m1" in cited
