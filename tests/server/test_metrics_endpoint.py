"""GET /metrics: every family, scraped over HTTP and read with Prometheus's own parser, after
turns that succeed, fail, are refused, wait and compact; no label names a conversation."""

from __future__ import annotations

import json
import math
import time

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from threadline.compaction.plan import Policy
from threadline.memory.store import MemoryStore
from threadline.memory.writer import MemoryWriter
from threadline.metrics.registry import Metrics
from threadline.models.scripted import ScriptedModel
from threadline.server.app import create_app
from threadline.standard import standard_engine
from threadline.stores.base import Store

TURN_INDEXES = {"1", "2-5", "6-10", "11-20", "21-50", "51+"}
# every family, with the labels its samples carry (le: only a histogram's _bucket samples)
FAMILIES = {
    "threadline_turns": ("counter", {"status"}),
    "threadline_model_calls": ("counter", {"status", "purpose"}),
    "threadline_prompt_tokens": ("counter", set()),
    "threadline_cached_tokens": ("counter", set()),
    "threadline_output_tokens": ("counter", set()),
    "threadline_cache_hit_ratio": ("gauge", set()),
    "threadline_ttft_seconds": ("histogram", {"turn_index", "le"}),
    "threadline_turn_duration_seconds": ("histogram", {"turn_index", "le"}),
    "threadline_compactions": ("counter", {"strategy", "reason"}),
    "threadline_memory_writes": ("gauge", {"decision"}),
    "threadline_memory_jobs": ("gauge", {"status"}),
    "threadline_memory_extraction_outputs": ("gauge", set()),
    "threadline_memory_extraction_schema_validity_ratio": ("gauge", set()),
    "threadline_lease_wait_seconds": ("histogram", {"le"}),
    "threadline_lease_rejects": ("counter", {"reason"}),
    "threadline_lease_cancels": ("counter", set()),
    "threadline_errors": ("counter", {"type"}),
    "threadline_delegations": ("counter", {"status"}),
    "threadline_delegated_tokens": ("counter", {"kind"}),
}
VALID = json.dumps({"facts": [{"text": "I live in Oslo", "about": "home"}]})


def _scrape(client: TestClient) -> dict[str, list[Sample]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == Metrics.content_type
    assert response.headers["content-type"].startswith("text/plain; version=")
    found: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(response.text):
        base = family.name.removesuffix("_created")
        if base != family.name and FAMILIES.get(base, ("gauge",))[0] != "gauge":
            continue  # prometheus-client's start time of each counter and histogram
        assert family.name in FAMILIES, f"undocumented family {family.name}"
        kind, labels = FAMILIES[family.name]
        assert family.type == kind, family.name
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                expected = labels if sample.name.endswith("_bucket") else labels - {"le"}
                assert set(sample.labels) == expected, (sample.name, sample.labels)
        found[family.name] = [s for s in family.samples if not s.name.endswith("_created")]
    return found


def _value(found: dict[str, list[Sample]], name: str, **labels: str) -> float:
    family = next(f for f in FAMILIES if name.startswith(f))
    return next(s.value for s in found[family] if s.name == name and s.labels == labels)


def test_every_family_is_scraped_with_bounded_labels(store: Store) -> None:
    metrics = Metrics()
    metrics.watch_memory(store, refresh_s=0)
    model = ScriptedModel()
    engine = standard_engine(store, model, hooks=[metrics.hook], observer=metrics,
                             policy=Policy(low_water=60, high_water=120, context_window=400,
                                           reserve=10))
    client = TestClient(create_app(engine, metrics))
    cids = [client.post("/v1/conversations", json={}).json()["id"] for _ in range(2)]
    for cid in cids:
        for n in range(3):
            sent = client.post(f"/v1/conversations/{cid}/messages",
                               json={"text": f"I live in Oslo. Turn {n}. " + "word " * 40,
                                     "user_id": "ann"})
            assert sent.status_code == 200, sent.text
    model.enqueue(RuntimeError("backend down"))
    failed = client.post(f"/v1/conversations/{cids[0]}/messages", json={"text": "again"})
    assert failed.status_code == 502
    store.lease(cids[1], "lease_other", 30, time.time())
    busy = client.post(f"/v1/conversations/{cids[1]}/messages",
                       json={"text": "there?", "on_busy": "reject"})
    assert busy.status_code == 409
    store.release_lease(cids[1], "lease_other")
    store.lease(cids[1], "lease_other", 0.3, time.time())  # a holder that then goes away
    waited = client.post(f"/v1/conversations/{cids[1]}/messages",
                         json={"text": "now?", "on_busy": "cancel"})
    assert waited.status_code == 200
    extractor = ScriptedModel([VALID, "not JSON"])
    MemoryWriter(store, MemoryStore(store), model=extractor).run(limit=2)

    found = _scrape(client)
    assert set(found) == set(FAMILIES)
    values = {label for samples in found.values() for s in samples for label in
              s.labels.values()}
    assert not any(cid in value for cid in cids for value in values)
    assert not any(value.startswith(("c_", "lease_")) for value in values)
    assert {s.labels["turn_index"] for s in found["threadline_ttft_seconds"]} == TURN_INDEXES

    assert _value(found, "threadline_turns_total", status="ok") == 7
    assert _value(found, "threadline_turns_total", status="failed") == 1
    assert _value(found, "threadline_model_calls_total", status="failed", purpose="turn") == 1
    assert _value(found, "threadline_errors_total", type="ModelCallFailed") == 1
    assert _value(found, "threadline_errors_total", type="TurnInProgress") == 1
    assert _value(found, "threadline_lease_rejects_total", reason="busy") == 1
    assert _value(found, "threadline_lease_cancels_total") == 1
    assert _value(found, "threadline_lease_wait_seconds_count") == 1
    assert _value(found, "threadline_ttft_seconds_count", turn_index="1") == 2
    assert _value(found, "threadline_ttft_seconds_count", turn_index="2-5") == 5
    assert _value(found, "threadline_turn_duration_seconds_count", turn_index="2-5") == 6
    assert sum(s.value for s in found["threadline_compactions"]) >= 1
    prompt = _value(found, "threadline_prompt_tokens_total")
    cached = _value(found, "threadline_cached_tokens_total")
    assert prompt > cached > 0 and _value(found, "threadline_output_tokens_total") > 0
    assert _value(found, "threadline_cache_hit_ratio") == cached / prompt
    assert _value(found, "threadline_memory_jobs", status="done") == 2
    assert _value(found, "threadline_memory_jobs", status="pending") == 4
    assert _value(found, "threadline_memory_writes", decision="ADD") == 1
    assert _value(found, "threadline_memory_writes", decision="NOOP") == 1
    assert _value(found, "threadline_memory_extraction_outputs") == 2
    assert _value(found, "threadline_memory_extraction_schema_validity_ratio") == 0.5


def test_before_any_turn_every_family_is_there_and_the_ratios_are_nan(store: Store) -> None:
    metrics = Metrics()
    metrics.watch_memory(store, refresh_s=0)
    engine = standard_engine(store, ScriptedModel(), hooks=[metrics.hook], observer=metrics)
    found = _scrape(TestClient(create_app(engine, metrics)))
    assert set(found) == set(FAMILIES)
    assert math.isnan(_value(found, "threadline_cache_hit_ratio"))
    assert math.isnan(_value(found, "threadline_memory_extraction_schema_validity_ratio"))
    assert _value(found, "threadline_turns_total", status="ok") == 0


def test_without_metrics_there_is_no_endpoint(store: Store) -> None:
    client = TestClient(create_app(standard_engine(store, ScriptedModel())))
    assert client.get("/metrics").status_code == 404
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_metrics_are_an_admins_once_tokens_are_required(store: Store) -> None:
    from threadline.items import utc_now
    from threadline.stores.tokens import TokenRole, issue

    tokens = store.tokens
    assert tokens is not None
    admin = issue(tokens, role=TokenRole.ADMIN, user_id=None, name=None, at=utc_now())[1]
    ann = issue(tokens, role=TokenRole.USER, user_id="ann", name=None, at=utc_now())[1]
    client = TestClient(create_app(standard_engine(store, ScriptedModel()), Metrics()))
    assert client.get("/metrics").status_code == 401
    refused = client.get("/metrics", headers={"Authorization": f"Bearer {ann}"})
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "Forbidden"
    assert client.get("/metrics", headers={"Authorization": f"Bearer {admin}"}
                      ).status_code == 200


def test_delegations_are_counted_with_what_their_children_spent(store: Store) -> None:
    from tests.turn.test_delegate import Searches, delegating, explorer, researcher, routed
    from threadline.turn.delegate import Delegation

    metrics = Metrics()
    model = routed(delegating("one", "two", "three"), explorer(1))
    engine = standard_engine(store, model, hooks=[metrics.hook], observer=metrics,
                             agents=[researcher(Searches())],
                             delegation=Delegation(max_fanout=2))
    client = TestClient(create_app(engine, metrics))
    cid = client.post("/v1/conversations", json={}).json()["id"]
    assert client.post(f"/v1/conversations/{cid}/messages", json={"text": "go"}).status_code \
        == 200
    found = _scrape(client)
    assert _value(found, "threadline_delegations_total", status="done") == 2
    assert _value(found, "threadline_delegations_total", status="failed") == 1  # the fan-out
    details = [i.content["details"] for i in store.history(cid) if "details" in i.content]
    for kind in ("prompt", "cached", "output"):
        assert _value(found, "threadline_delegated_tokens_total", kind=kind) == sum(
            d[f"{kind}_tokens"] for d in details)
    assert _value(found, "threadline_turns_total", status="ok") == 3  # the children's too
