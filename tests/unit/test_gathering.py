"""A PostgreSQL writer's wait for its next batch (store/postgres/gathering.py) and the CPU pressure
that lengthens it (store/postgres/cpu_pressure.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eventcoord.store.postgres import cpu_pressure, gathering
from eventcoord.store.postgres.cpu_pressure import CpuPressure
from eventcoord.store.postgres.gathering import GATHER_MAX, GROUP_COMMIT_WINDOW, Gathering


def test_a_writer_with_cpu_to_spare_waits_the_short_window_whatever_its_last_batch_took() -> None:
    assert gathering.window(0.004, starved=False) == GROUP_COMMIT_WINDOW
    assert gathering.window(0.0001, starved=False) == GROUP_COMMIT_WINDOW


def test_a_starved_writer_waits_as_long_as_its_last_batch_took_within_bounds() -> None:
    assert gathering.window(0.003, starved=True) == pytest.approx(0.003)
    assert gathering.window(0.0002, starved=True) == GROUP_COMMIT_WINDOW  # never shorter
    assert gathering.window(0.5, starved=True) == GATHER_MAX  # never longer


async def test_the_wait_ends_as_soon_as_as_many_commands_wait_as_the_last_batch_held() -> None:
    g = Gathering()
    loop = asyncio.get_running_loop()
    began = loop.time()
    waiting = asyncio.ensure_future(g.wait(3, 5.0))
    await asyncio.sleep(0)
    assert g.busy
    g.arrived(1)
    g.arrived(2)
    await asyncio.sleep(0)
    assert not waiting.done()  # two of three: it waits on
    g.arrived(3)
    assert await waiting is True
    assert loop.time() - began < 1.0  # not the 5 s window
    assert not g.busy


async def test_the_wait_ends_with_its_window_when_too_few_come() -> None:
    g = Gathering()
    loop = asyncio.get_running_loop()
    began = loop.time()
    g_task = asyncio.ensure_future(g.wait(10, 0.02))
    await asyncio.sleep(0)
    g.arrived(4)
    assert await g_task is False
    assert loop.time() - began >= 0.015
    assert not g.busy
    g.arrived(10)  # after the wait: nothing to end, nothing raised


async def test_a_second_writer_gathering_at_the_same_time_waits_its_window_alone() -> None:
    g = Gathering()
    first = asyncio.ensure_future(g.wait(2, 5.0))
    await asyncio.sleep(0)
    second = await g.wait(1, 0.01)  # the first one's target is what arrivals end
    assert second is False
    assert not first.done()
    g.arrived(2)
    assert await first is True


def _schedstat(path: Path, ran_ns: int, delay_ns: int) -> None:
    path.write_text(f"{ran_ns} {delay_ns} 42\n")


def test_the_pressure_is_the_time_waited_for_a_cpu_per_second_run(tmp_path: Path) -> None:
    stat = tmp_path / "schedstat"
    _schedstat(stat, 0, 0)
    p = CpuPressure(stat)
    assert p.sample(0.0) == 0.0  # the first reading is the baseline
    ran = delay = 0
    now = 0.0
    for _ in range(40):  # waiting as long as it runs, for four seconds
        ran, delay, now = ran + 100_000_000, delay + 100_000_000, now + 0.125
        _schedstat(stat, ran, delay)
        p.sample(now)
    assert p.pressure == pytest.approx(1.0, abs=0.01)
    assert p.starved(now)
    for _ in range(40):  # then a tenth of that
        ran, delay, now = ran + 100_000_000, delay + 10_000_000, now + 0.125
        _schedstat(stat, ran, delay)
        p.sample(now)
    assert p.pressure == pytest.approx(0.1, abs=0.01)
    assert not p.starved(now)


def test_the_pressure_is_read_at_most_every_tenth_of_a_second(tmp_path: Path) -> None:
    stat = tmp_path / "schedstat"
    _schedstat(stat, 0, 0)
    p = CpuPressure(stat)
    p.sample(0.0)
    _schedstat(stat, 100_000_000, 500_000_000)
    assert p.sample(0.05) == 0.0  # too soon: not read
    assert p.sample(0.1) > 0.0


def test_no_scheduler_statistics_means_no_pressure(tmp_path: Path) -> None:
    p = CpuPressure(tmp_path / "missing")
    assert p.sample(0.0) == 0.0
    assert not p.starved(1.0)
    garbled = tmp_path / "garbled"
    garbled.write_text("not numbers")
    assert not CpuPressure(garbled).starved(1.0)


def test_this_threads_statistics_are_read_where_the_kernel_keeps_them() -> None:
    first = cpu_pressure.read_schedstat()
    if first is None:
        pytest.skip("no /proc/thread-self/schedstat on this system")
    sum(range(2_000_000))  # run a little
    second = cpu_pressure.read_schedstat()
    assert second is not None
    assert second[0] > first[0]  # this thread's run time grew
    assert second[1] >= first[1] >= 0


async def test_ending_a_wait_answers_that_too_few_came() -> None:
    g = Gathering()
    waiting = asyncio.ensure_future(g.wait(5, 30.0))
    await asyncio.sleep(0)
    g.end()
    assert await asyncio.wait_for(waiting, 5.0) is False
    g.end()  # nothing to end: nothing raised
