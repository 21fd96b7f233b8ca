import pytest

import adjpos.tasks as tasks
from adjpos.tasks import TASKS, Addition, Indexing, Ordering, Reversal, Task, get_task


@pytest.mark.parametrize(
    ("name", "cls", "defaults"),
    [
        ("addition", Addition, {"min_digits": 1, "max_digits": 4, "max_prompt_len": 9}),
        ("reversal", Reversal, {"min_digits": 1, "max_digits": 16}),
        ("indexing", Indexing, {"min_digits": 1, "max_digits": 9}),
        ("ordering", Ordering, {"min_digits": 1, "max_digits": 5}),
    ],
)
def test_get_task_builds_defaults(name, cls, defaults):
    task = get_task(name)
    assert type(task) is cls and isinstance(task, Task)
    assert task.name == name
    assert task.to_dict() == defaults


@pytest.mark.parametrize("name", TASKS)
def test_to_dict_round_trips(name):
    task = get_task(name, max_digits=3)
    assert task.max_digits == 3
    assert get_task(name, **task.to_dict()) == task


def test_tasks_are_frozen():
    task = get_task("reversal")
    with pytest.raises(AttributeError):
        task.max_digits = 3


def test_public_names_are_exported():
    for name in tasks.__all__:
        assert hasattr(tasks, name)
    assert {"get_task", "TASKS", "VOCAB", "encode", "decode", "split_of"} <= set(tasks.__all__)


def test_parameters_carry_help_text():
    import dataclasses

    for name in TASKS:
        for field in dataclasses.fields(type(get_task(name))):
            assert field.metadata["help"]
