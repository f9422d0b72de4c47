"""The schema-pruning bound script: which tables a question links, and how outcomes are counted."""

from __future__ import annotations

import json

import pytest

from tests.scripts import load_script

TABLES = {
    "Student": ["StuID", "LName", "Age"],
    "Has_Pet": ["StuID", "PetID"],
    "Pets": ["PetID", "PetType", "pet_age"],
    "Dorm": ["dormid", "dorm_name"],
}


@pytest.fixture(scope="module")
def pb():
    return load_script("pruning_bound")


def test_words_split_camel_case_and_underscores_and_drop_question_words(pb):
    assert pb.words("PetType") == {"pet", "type"}
    assert pb.words("dorm_name") == {"dorm"}  # "name" is in nearly every question
    assert pb.words("How many students?") == {"student"}  # plural dropped on words over 4 letters


def test_linked_tables_keep_matches_and_the_bridge_between_them(pb):
    # "students" links Student, "pets" links Pets; Has_Pet shares a key with both, so it stays
    assert pb.linked_tables("How many pets do students own?", TABLES) == {"student", "pets", "has_pet"}
    # one linked table: no bridge is needed, the others go
    assert pb.linked_tables("Which dorm is the largest?", TABLES) == {"dorm"}


def test_tables_read_and_unparsable_statements(pb):
    assert pb.tables_read("SELECT COUNT(*) FROM Pets AS T1 JOIN Has_Pet AS T2 ON T1.PetID = T2.PetID") == {
        "pets",
        "has_pet",
    }
    assert pb.tables_read("SELECT FROM WHERE (") is None


def _record(task, success, answer):
    return {"task": task, "success": success, "votes": [{"winner": 0, "candidates": [{"action": answer}]}]}


def test_bound_counts_fixable_failures_and_broken_successes(pb):
    tasks = [
        {"query": "How old are the pets on average?", "gold": "SELECT AVG(pet_age) FROM Pets", "db_tables": TABLES},
        {
            "query": "What is the last name of the oldest one?",  # links nothing the gold needs
            "gold": "SELECT LName FROM Student ORDER BY Age DESC LIMIT 1",
            "db_tables": TABLES,
        },
    ]
    records = [
        # failed with a join pruning would have removed, and the gold reads only Pets: fixable
        _record(0, False, "SELECT AVG(T1.Age) FROM Student AS T1 JOIN Pets AS T2"),
        # solved, but its gold reads Student, which the question never names: broken by pruning
        _record(1, True, "SELECT LName FROM Student ORDER BY Age DESC LIMIT 1"),
    ]
    assert pb.bound(records, tasks) == {"gold_kept": [0], "could_fix": [0], "would_break": [1]}
    # a failure whose answer already reads only linked tables is not counted as fixable
    assert pb.bound([_record(0, False, "SELECT MAX(pet_age) FROM Pets")], tasks)["could_fix"] == []


def test_bad_candidate_files_are_refused_with_the_file_and_line(pb, tmp_path):
    with pytest.raises(SystemExit, match="no such file"):
        pb.load_records(tmp_path / "absent.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_record(0, True, "SELECT 1")) + "\n\n{not json\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:3: not a JSON record"):
        pb.load_records(bad)
    bad.write_text(json.dumps({"task": 0, "success": True}) + "\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: not a candidate record \(no votes field\)"):
        pb.load_records(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: not a candidate record"):
        pb.load_records(bad)
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(_record(0, True, "SELECT 1")) + "\n")
    assert pb.load_records(good) == [_record(0, True, "SELECT 1")]
