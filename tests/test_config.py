from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval_node.config import load_config
from retrieval_node.errors import ConfigError
from retrieval_node.models import RiskProfile

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_every_shipped_config_file_loads():
    files = sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert files == ["agents.yaml", "contracts.yaml", "glossary.yaml", "retrieval.yaml", "risk_signals.yaml", "weights.yaml", "zones.yaml"]
    cfg = load_config(CONFIGS, environ={})
    assert cfg.glossary.concepts and "questions" in cfg.contracts.contracts
    assert set(cfg.agents) == {"investigator", "tax", "condo", "scribe"}
    assert cfg.weights[RiskProfile.HIGH_RISK].beta == 0.5
    assert cfg.agents["investigator"].intent_id == "title_risk_scan_v1"
    assert cfg.agents["tax"].intent_id == "tax_arrears_check_v1"
    assert cfg.agents["condo"].intent_id == "condo_reserve_fund_health_v1"
    assert cfg.risk_signals is not None and {"title", "condo", "tax"} <= set(cfg.risk_signals.domains)
    assert cfg.contracts is not None and set(cfg.contracts.contracts) == set(cfg.agents) | {"questions"}


@pytest.fixture()
def cfg_dir(tmp_path: Path) -> Path:
    d = tmp_path / "configs"
    shutil.copytree(CONFIGS, d)
    return d


def test_unknown_key_names_file_and_key(cfg_dir: Path):
    p = cfg_dir / "retrieval.yaml"
    p.write_text(p.read_text() + "semantic_topk: 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg_dir, environ={})
    assert "retrieval.yaml" in str(info.value) and "semantic_topk" in str(info.value)


def test_weights_that_do_not_sum_to_one(cfg_dir: Path):
    (cfg_dir / "weights.yaml").write_text(
        "profiles:\n  HIGH_RISK: {alpha: 0.5, beta: 0.5, gamma: 0.2}\n  BALANCED: {alpha: 0.5, beta: 0.3, gamma: 0.2}\n  LOW_RISK: {alpha: 0.7, beta: 0.2, gamma: 0.1}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(cfg_dir, environ={})
    assert "weights.yaml" in str(info.value) and "HIGH_RISK" in str(info.value) and "must equal 1" in str(info.value)


def test_negative_weight_rejected(cfg_dir: Path):
    (cfg_dir / "weights.yaml").write_text(
        "profiles:\n  HIGH_RISK: {alpha: 1.2, beta: -0.2, gamma: 0.0}\n  BALANCED: {alpha: 0.5, beta: 0.3, gamma: 0.2}\n  LOW_RISK: {alpha: 0.7, beta: 0.2, gamma: 0.1}\n"
    )
    with pytest.raises(ConfigError, match="HIGH_RISK"):
        load_config(cfg_dir, environ={})


def test_agent_with_unknown_section_and_zone(cfg_dir: Path):
    p = cfg_dir / "agents.yaml"
    p.write_text(p.read_text().replace("[TAX_ARREARS, GENERAL]", "[TAX_ARREARS, TAXES]"))
    with pytest.raises(ConfigError) as info:
        load_config(cfg_dir, environ={})
    assert "agents.yaml" in str(info.value) and "tax" in str(info.value) and "TAXES" in str(info.value)


def test_misnamed_config_file_is_an_error(cfg_dir: Path):
    (cfg_dir / "agent.yaml").write_text("agents: {}\n")
    with pytest.raises(ConfigError, match="agent.yaml"):
        load_config(cfg_dir, environ={})


def test_bad_yaml(cfg_dir: Path):
    (cfg_dir / "zones.yaml").write_text("rules: [\n")
    with pytest.raises(ConfigError, match="zones.yaml"):
        load_config(cfg_dir, environ={})


def test_environment_overrides_and_validates(cfg_dir: Path):
    cfg = load_config(cfg_dir, environ={"RETRIEVAL_NODE_SEMANTIC_TOP_K": "25", "QDRANT_API_KEY": "k"})
    assert cfg.retrieval.semantic_top_k == 25
    assert cfg.retrieval.vector_db_api_key == "k"
    with pytest.raises(ConfigError, match="RETRIEVAL_NODE_SEMANTIC_TOP_K"):
        load_config(cfg_dir, environ={"RETRIEVAL_NODE_SEMANTIC_TOP_K": "-1"})
    with pytest.raises(ConfigError, match="RETRIEVAL_NODE_SEMANTIC_TOPK"):
        load_config(cfg_dir, environ={"RETRIEVAL_NODE_SEMANTIC_TOPK": "5"})


def test_zone_mapping_derives_zones(node_config):
    z = node_config.zones
    assert z.zones_for("INSTRUMENTS_REGISTER", "TITLE_SEARCH") == ["instruments_register"]
    assert z.zones_for("TAX_ARREARS", "TAX_CERTIFICATE") == ["municipal_arrears", "tax_certificate"]
    assert z.zones_for("GENERAL", "OTHER") == []
    assert z.zones_for("GENERAL", "OTHER", ["tax_liens"]) == ["tax_liens"]


def test_concurrency_defaults_to_cores_and_engines_validate():
    import os

    cfg = load_config(environ={})
    assert cfg.retrieval.max_concurrent_retrievals is None
    assert cfg.retrieval.concurrency == max(1, os.cpu_count() or 1)
    assert load_config(environ={"RETRIEVAL_NODE_MAX_CONCURRENT_RETRIEVALS": "3"}).retrieval.concurrency == 3
    assert cfg.retrieval.mem0_vector_store == "auto"  # the store's recorded engine; edge for a new store
    with pytest.raises(ConfigError, match="mem0_vector_store"):
        load_config(environ={"RETRIEVAL_NODE_MEM0_VECTOR_STORE": "chroma"})


def test_the_configuration_files_read_the_same_with_the_c_and_the_python_safe_loader():
    """The store reads its YAML with libyaml's safe loader when PyYAML has it (config._SAFE_LOADER): every shipped file
    must give exactly what the pure-Python safe loader gives."""
    import yaml

    from retrieval_node import config as config_module
    from retrieval_node._config_dir import CONFIG_FILES, default_config_dir

    files = [default_config_dir() / name for name in CONFIG_FILES if (default_config_dir() / name).exists()]
    assert len(files) == len(CONFIG_FILES)
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert config_module._read_yaml(path) == yaml.load(text, Loader=yaml.SafeLoader), path.name
