"""The garbage collector's pause around each call (retrieval_node.collector): off while the node works, back as the
host had it afterwards, never off for good however calls overlap."""

from __future__ import annotations

import gc
import threading
import time

import pytest

import retrieval_node.collector as collector
from retrieval_node.agent import RetrievalAgent
from retrieval_node.collector import paused
from tests.conftest import FULL_TRUST

DEAL = "2026-ACME-0042"


@pytest.fixture()
def collector_on():
    assert gc.isenabled()
    yield
    gc.enable()


def _config(node_config, pause: bool):
    return node_config.model_copy(update={"retrieval": node_config.retrieval.model_copy(update={"pause_collector": pause})})


class _Watching:
    """FAULT INJECTION (an observer only): the store's real registry, noting whether the collector was on whenever the
    pipeline reads it."""

    def __init__(self, real) -> None:
        self.real, self.seen = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def deal_records(self, deal_id, **kw):
        self.seen.append(gc.isenabled())
        return self.real.deal_records(deal_id, **kw)


@pytest.mark.parametrize("pause", [True, False])
def test_a_call_pauses_the_collector_when_configured_and_leaves_it_as_it_was(sample_store, node_config, collector_on, pause) -> None:
    real = sample_store.registry
    watch = sample_store.registry = _Watching(real)
    try:
        # each call below builds the deal's view from Mem0's listing (a bump drops the listing the ingest offered)
        sample_store.bump([DEAL])
        agent = RetrievalAgent(sample_store, config=_config(node_config, pause), trust=FULL_TRUST)
        agent.retrieve_sync(agent.intent_for("investigator", deal_id=DEAL))
        assert gc.isenabled()
        gc.disable()  # a host that runs without the collector keeps it off
        sample_store.bump([DEAL])
        agent.retrieve_sync(agent.intent_for("condo", deal_id=DEAL))
        assert not gc.isenabled()
    finally:
        sample_store.registry = real
        gc.enable()
    assert watch.seen == [not pause, False]


def test_overlapping_pauses_turn_the_collector_back_on_once_the_last_one_leaves(collector_on) -> None:
    outer, inner = paused(), paused()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # threads leave in any order
    assert not gc.isenabled()
    inner.__exit__(None, None, None)
    assert gc.isenabled()
    with paused(False):
        assert gc.isenabled()


def test_calls_that_keep_overlapping_still_get_a_collection(collector_on, monkeypatch) -> None:
    """One call always in flight (a busy service): the collector is never re-enabled, so the call leaving after
    MAX_PAUSE_S runs a full collection itself, and the cycles the host dropped meanwhile are freed."""
    monkeypatch.setattr(collector, "MAX_PAUSE_S", 0.05)
    full: list[int] = []

    def watch(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    class Cycle:
        pass

    gc.callbacks.append(watch)
    release = threading.Event()
    entered = threading.Event()

    def long_call():
        with paused():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=long_call)
    t.start()
    try:
        entered.wait(5)
        a = Cycle()
        a.me = a  # garbage only a collection frees
        probe = __import__("weakref").ref(a)
        del a
        with paused():
            time.sleep(0.01)
        assert probe() is not None and not full  # not yet: the pause is younger than MAX_PAUSE_S
        time.sleep(0.06)
        with paused():
            pass
        assert full and probe() is None and not gc.isenabled()
    finally:
        release.set()
        t.join()
        gc.callbacks.remove(watch)
    assert gc.isenabled()
