"""Runs the real ``local-small`` model scenarios in a child process and prints one JSON object.

Started by test_server.py with ``python real_model_driver.py MODE``: a native crash here (or in
the server) cannot take pytest down, and pytest checks afterwards that no server outlived us.

Modes:
    scenarios  the main run: start, chat, prompt-cache reuse, grammar, AutoGen, crash + restart.
    orphan     start a server, print its pid, then die by SIGKILL (no atexit hooks run).
    sampling   in this process: the server's model class (grammar checked after sampling) against
               the stock llama_cpp.Llama (grammar in the sampler chain) on the same requests.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import urllib.request
from typing import Any

from stateflow.backends.local import (
    LocalServerPool,
    ManagedServer,
    ServerConfig,
    ServerCrashedError,
    ServerStartError,
    check_server,
    regex_to_gbnf,
    resolve_endpoint,
)
from stateflow.profiles import BUILTIN_PROFILES

PROFILE = BUILTIN_PROFILES["local-small"]
THOUGHT_ACTION = r"Thought: [^\n]{1,200}\nAction: (execute\[[^\n]{1,200}\]|submit)"
SQL_SYSTEM = "You are a SQL assistant. Answer with a single SQL query and nothing else."


def _chat(client: Any, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    resp = client.chat.completions.create(
        model=PROFILE.model, messages=messages, temperature=0.0, max_tokens=extra.pop("max_tokens", 48), **extra
    )
    usage = resp.usage
    details = getattr(usage, "prompt_tokens_details", None)
    return {
        "content": resp.choices[0].message.content or "",
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": getattr(details, "cached_tokens", None),
        "seconds": time.perf_counter() - t0,
    }


def scenarios() -> dict[str, Any]:
    from openai import OpenAI

    out: dict[str, Any] = {}
    pool = LocalServerPool()

    # Several threads ask at once: one server, one start, one URL.
    urls: list[str] = []
    threads = [threading.Thread(target=lambda: urls.append(resolve_endpoint(PROFILE, pool))) for _ in range(3)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["start_seconds"] = time.perf_counter() - t0
    server = pool.server("local-small")
    out["urls"] = sorted(set(urls))
    out["starts"] = server.starts
    out["pid1"] = server.pid
    url = urls[0]
    with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=5) as resp:
        out["health"] = json.loads(resp.read())

    client = OpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=120)
    conv = [
        {"role": "system", "content": SQL_SYSTEM},
        {"role": "user", "content": "Table singer(singer_id, name, age). How many singers are there?"},
    ]
    out["turn1"] = t1 = _chat(client, conv)
    conv += [
        {"role": "assistant", "content": t1["content"]},
        {"role": "user", "content": "Observation: 6. Now list the names of singers older than 30."},
    ]
    out["turn2"] = t2 = _chat(client, conv)
    # Another conversation in between (another worker / another state's system message) ...
    out["other"] = _chat(
        client,
        [
            {"role": "system", "content": "You are a shell expert. Answer with one bash command."},
            {"role": "user", "content": "Count the lines of all .py files under src/."},
        ],
        max_tokens=16,
    )
    # ... then the first conversation continues: its state comes back from the prompt cache.
    conv += [
        {"role": "assistant", "content": t2["content"]},
        {"role": "user", "content": "Observation: Joe, Ann. Now give their average age."},
    ]
    out["turn3"] = _chat(client, conv)

    # The plain completions route reports cached tokens too.
    prompt = "-- SQLite\nCREATE TABLE singer(name TEXT, age INT);\n-- all singers older than 30\nSELECT"
    for key, text in (("completion1", prompt), ("completion2", prompt + " name FROM singer WHERE age > 30;\n--")):
        c = client.completions.create(model=PROFILE.model, prompt=text, max_tokens=4, temperature=0.0)
        details = c.usage.prompt_tokens_details
        out[key] = {"prompt_tokens": c.usage.prompt_tokens, "cached_tokens": getattr(details, "cached_tokens", None)}

    grammar = regex_to_gbnf(THOUGHT_ACTION)
    react = [
        {
            "role": "system",
            "content": "You solve SQL tasks. Reply in exactly this format:\nThought: <your reasoning>\n"
            "Action: execute[<one SQL query>] or Action: submit",
        },
        {"role": "user", "content": "Task: how many singers are older than 40? Table singer(name, age)."},
    ]
    out["grammar"] = g = _chat(client, react, max_tokens=300, extra_body={"grammar": grammar})
    g["matches"] = re.fullmatch(THOUGHT_ACTION, g["content"]) is not None

    # The one-shot answer grammar ends the action at its first "]": asked to copy a run-on line
    # (what the 0.5B model wrote in 96 of 100 one-shot answers), the model must stop there.
    from stateflow.tasks.kit.grammar import ACTION_ONLY_GBNF

    run_on = "Action: execute[SELECT name FROM singer]. Action: submit. Action: execute[SELECT age FROM singer]"
    copy = [
        {"role": "system", "content": "Repeat the user's message exactly, character for character."},
        {"role": "user", "content": run_on},
    ]
    out["action_only"] = _chat(client, copy, max_tokens=80, extra_body={"grammar": ACTION_ONLY_GBNF})

    # A grammar llama.cpp cannot parse is the client's error; the server answers the next request.
    try:
        _chat(client, copy, max_tokens=8, extra_body={"grammar": 'root ::= ("a"'})
        out["bad_grammar"] = {"status": 200}
    except Exception as err:  # openai.BadRequestError on a 400
        out["bad_grammar"] = {"status": getattr(err, "status_code", None), "message": str(err)}
    out["after_bad_grammar"] = _chat(client, copy, max_tokens=80, extra_body={"grammar": ACTION_ONLY_GBNF})
    out["pid_after_bad_grammar"] = server.pid

    from autogen import ConversableAgent

    agent = ConversableAgent(
        "solver",
        system_message=SQL_SYSTEM,
        llm_config={
            "config_list": [{"model": PROFILE.model, "base_url": url, "api_key": "not-needed", "price": [0, 0]}],
            "cache_seed": None,
            "temperature": 0.0,
            "max_tokens": 48,
        },
        human_input_mode="NEVER",
    )
    reply = agent.generate_reply(messages=[{"role": "user", "content": "Table t(a). Select every a."}])
    out["autogen_reply"] = reply if isinstance(reply, str) else json.dumps(reply)
    summary = agent.client.total_usage_summary or {}
    out["autogen_usage"] = {k: v for k, v in summary.items() if isinstance(v, dict)}

    out["stats_before_crash"] = server.stats()

    # A reply that turns into a run of one character stops there, not at max_tokens.
    body = {
        "model": PROFILE.model,
        "prompt": "SELECT name FROM t LIMIT 1" + "0" * 30,
        "temperature": 0.0,
        "max_tokens": 300,
    }
    request = urllib.request.Request(
        url + "/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as resp:
        answer = json.loads(resp.read())
    out["run"] = {
        "content": answer["choices"][0]["text"],
        "completion_tokens": answer["usage"]["completion_tokens"],
        "stopped_by": answer["timings"].get("stopped_by"),
    }

    # A client that gives up frees the model: its request stops at the next token.
    before = server.stats()
    hasty = OpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=2.0)
    count = [{"role": "user", "content": "Count from 1 to 1000, separated by commas. Write every number."}]
    try:
        _chat(hasty, count, max_tokens=1500)
        out["abandoned"] = "answered"
    except Exception as err:
        out["abandoned"] = type(err).__name__
    deadline = time.monotonic() + 120
    while server.stats()["requests"] == before["requests"] and time.monotonic() < deadline:
        time.sleep(0.1)
    after = server.stats()
    out["abandoned_tokens"] = after["completion_tokens"] - before["completion_tokens"]
    out["abandoned_counted"] = after["requests"] - before["requests"]

    # A forked child that closes its inherited pool (e.g. via atexit) must not stop our server.
    child = os.fork()
    if child == 0:
        pool.close()
        os._exit(0)
    os.waitpid(child, 0)
    out["alive_after_fork_close"] = server.alive()

    # Crash: the call in flight fails, check() explains, the next resolve restarts on the same URL.
    os.kill(server.pid, signal.SIGSEGV)
    deadline = time.monotonic() + 10
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        _chat(client, conv)
        out["after_crash"] = "request succeeded"
    except Exception as err:
        out["after_crash"] = type(err).__name__
    try:
        check_server(PROFILE, pool)
        out["check"] = None
    except ServerCrashedError as err:
        out["check"] = str(err)
    out["url_after_restart"] = resolve_endpoint(PROFILE, pool)
    out["pid2"] = server.pid
    out["starts_after_restart"] = server.starts
    out["after_restart"] = _chat(client, conv[:2])

    # A fixed port that is taken gives a clear error.
    taken = int(url.rsplit(":", 1)[1].split("/")[0])
    clash = ManagedServer(ServerConfig(model_path=server.config.model_path, alias="x", port=taken))
    try:
        clash.ensure_running()
        out["clash"] = "started"
    except ServerStartError as err:
        out["clash"] = str(err)
    out["stats"] = server.stats()
    out["server_pids"] = [out["pid1"], out["pid2"]]
    return out  # the pool's atexit hook stops the server


def sampling() -> dict[str, Any]:
    import llama_cpp

    from stateflow.backends.local import CATALOG, ModelStore
    from stateflow.backends.local.server_app import load_model

    path = ModelStore().locate(CATALOG["local-small"], allow_network=False).path
    config = ServerConfig(model_path=path, alias=PROFILE.model, cache_bytes=0).child_config(0)
    ours = load_model(config)
    stock = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=config["n_ctx"],
        n_batch=config["n_batch"],
        n_threads=config["n_threads"],
        logits_all=False,
        verbose=False,
    )
    react = [
        {"role": "system", "content": "You solve SQL tasks. Reply as:\nThought: <reasoning>\nAction: execute[<SQL>]"},
        {"role": "user", "content": "Task: how many singers are older than 40? Table singer(name, age)."},
    ]
    cases = {
        # the model's own choices mostly fit: few or no resamples
        "thought_action": (react, regex_to_gbnf(THOUGHT_ACTION)),
        # the model would answer with SQL; the grammar forces digits: its first choices are rejected
        "forced": (react, 'root ::= "Answer: " [0-9]{2,4} "."\n'),
    }
    out: dict[str, Any] = {}
    for name, (messages, gbnf) in cases.items():
        replies = {}
        for label, llama in (("ours", ours), ("stock", stock)):
            for temperature, tag in ((0.0, ""), (0.8, "_warm")):
                r = llama.create_chat_completion(
                    messages=messages,
                    temperature=temperature,
                    seed=7,
                    max_tokens=120,
                    repeat_penalty=1.1,
                    grammar=llama_cpp.LlamaGrammar.from_string(gbnf),
                )
                replies[label + tag] = r["choices"][0]["message"]["content"]
                if label == "ours" and not tag:
                    out[name + "_timings"] = r.get("timings")
        out[name] = replies
    ours.close()
    stock.close()
    return out


def replicas() -> dict[str, Any]:
    """Two pinned replicas of local-small: routing by context, pinning, a killed replica."""
    from dataclasses import replace

    from openai import APIConnectionError, OpenAI

    from stateflow.backends.local import start_servers
    from stateflow.backends.local.replicas import route_requests

    profile = replace(PROFILE, replicas=2, max_retries=0)
    pool = LocalServerPool()
    out: dict[str, Any] = {"started": start_servers([profile], pool)}
    server = pool.server("local-small")
    out["pids"] = server.pids
    out["cpus"] = [_allowed_cpus(pid) for pid in server.pids]
    out["threads"] = [m.config.n_threads for m in server.members]
    ask = [{"role": "user", "content": "Write SQL that counts the rows of table singer."}]
    urls: dict[str, str] = {}
    answers: dict[str, str] = {}

    def episode(key: str, hold: threading.Event, go: threading.Event) -> None:
        with route_requests(key):
            urls[key] = url = resolve_endpoint(profile, pool)
            hold.set()
            go.wait(30)  # both episodes in flight before either ends
            client = OpenAI(base_url=url, api_key="x", max_retries=0)
            answers[key] = _chat(client, ask)["content"]

    held = [threading.Event(), threading.Event()]
    go = threading.Event()
    threads = [threading.Thread(target=episode, args=(k, h, go)) for k, h in zip(("db1", "db2"), held, strict=True)]
    threads[0].start()
    held[0].wait(30)
    threads[1].start()
    held[1].wait(30)
    go.set()
    for t in threads:
        t.join(120)
    out["urls"], out["answers"] = urls, answers
    victim = server.members[server.router.peek("db2")]
    out["victim_cpus"] = list(victim.config.cpus)
    os.kill(victim.pid, signal.SIGKILL)
    time.sleep(0.3)
    with route_requests("db2"):
        try:
            _chat(OpenAI(base_url=urls["db2"], api_key="x", max_retries=0), ask)
            out["after_kill"] = "answered"
        except APIConnectionError as err:
            out["after_kill"] = type(err).__name__
        try:
            check_server(profile, pool)
            out["check"] = "no error"
        except ServerCrashedError as err:
            out["check"] = str(err)
        url = resolve_endpoint(profile, pool)
        out["restarted_url"] = url
        out["restarted_cpus"] = _allowed_cpus(victim.pid)
        out["after_restart"] = _chat(OpenAI(base_url=url, api_key="x", max_retries=0), ask)["content"]
    with route_requests("db1"):
        check_server(profile, pool)  # the other replica never died
        out["db1_still"] = resolve_endpoint(profile, pool)
    pool.close()
    return out


def _allowed_cpus(pid: int) -> str:
    from pathlib import Path

    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split()[1]
    return "?"


def orphan() -> None:
    pool = LocalServerPool()
    pool.endpoint("local-small")
    print(json.dumps({"server_pid": pool.server("local-small").pid}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "orphan":
        orphan()
    elif sys.argv[1] == "replicas":
        print(json.dumps(replicas()), flush=True)
    elif sys.argv[1] == "sampling":
        print(json.dumps(sampling()), flush=True)
    else:
        print(json.dumps(scenarios()), flush=True)
