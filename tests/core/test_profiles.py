"""Model profiles from Python, TOML and the CLI."""

from __future__ import annotations

import pytest

from stateflow import ConfigError, ModelAssignment, ModelProfile, load_config, parse_model_options
from stateflow.profiles import BUILTIN_PROFILES


def test_cli_options_parse_into_an_assignment():
    opts = parse_model_options(["gpt-4o-mini", "Solve=local", "*=local-small"])
    assert opts == {"default": "local-small", "Solve": "local"}
    a = ModelAssignment.of(opts)
    assert a.profile_for("Solve").name == "local"
    assert a.profile_for("Verify").name == "local-small"
    assert a.profile_for("Verify", explicit="gpt-4o").model == "gpt-4o"


@pytest.mark.parametrize("bad", ["=local", "Solve=", ""])
def test_bad_cli_option_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match="expected NAME or STATE=NAME"):
        parse_model_options([bad])


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown profile 'gpt-5-ultra'.*gpt-4o-mini"):
        ModelAssignment.of({"Solve": "gpt-5-ultra"})


def test_toml_defines_profiles_and_assignment(tmp_path):
    cfg = tmp_path / "models.toml"
    cfg.write_text(
        """
[profiles.my-vllm]
model = "Qwen/Qwen2.5-Coder-7B-Instruct"
provider = "vllm"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "MY_KEY"
stop = ["Observation:"]
price_per_1k = [0.1, 0.2]
extra_body = { top_k = 20 }

[profiles.local]
temperature = 0.3
n_threads = 1

[models]
default = "my-vllm"
Solve = "local"
"""
    )
    a = load_config(cfg)
    p = a.profile_for("Observe")
    assert (p.provider, p.stop, p.price_per_1k, dict(p.extra_body)) == (
        "vllm",
        ("Observation:",),
        (0.1, 0.2),
        {"top_k": 20},
    )
    assert p.cost(1000, 1000) == pytest.approx(0.3)
    local = a.profile_for("Solve")
    assert local.temperature == 0.3 and local.provider == "local"  # built-in overridden field by field
    assert local.n_threads == 1 and BUILTIN_PROFILES["local"].n_threads is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[profiles.x]\nmodle = 'typo'\n", r"\[profiles.x\]: unknown key\(s\) \['modle'\]"),
        ("[profiles.x]\nprovider = 'openai'\n", r"\[profiles.x\]: 'model' is required"),
        ("[profiles.x]\nmodel='m'\nprovider = 'anthropic'\n", "unknown provider 'anthropic'"),
        ("[models]\nSolve = 'missing'\n", "unknown profile 'missing'"),
        ("[modles]\n", "unknown top-level table"),
        ("[profiles.local]\nn_threads = 0\n", r"\[profiles.local\].*n_threads = 0"),
        ("[profiles.x]\nmodel = 'm'\nn_threads = 2\n", "n_threads = 2 applies to the embedded model only"),
        ("this is = not toml = ", "invalid TOML"),
    ],
)
def test_bad_toml_names_file_and_key(tmp_path, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as exc:
        load_config(cfg)
    assert str(cfg) in str(exc.value)


def test_api_key_comes_from_the_environment(monkeypatch):
    p = ModelProfile(name="o", model="gpt-4o-mini", api_key_env="SF_TEST_KEY")
    monkeypatch.delenv("SF_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"\$SF_TEST_KEY is not set"):
        p.api_key()
    monkeypatch.setenv("SF_TEST_KEY", "sk-test")
    assert p.api_key() == "sk-test"
    assert ModelProfile(name="v", model="m", base_url="http://127.0.0.1:1/v1", api_key_env=None).api_key()
