"""A fleet on one PostgreSQL (issue 25): services as machines, each with
agents calling the hook in a loop, all recording into one PostgreSQL server.

Each service is a machine: its own state folder, socket and
``DURABILITY_HOST_ID``, a real ``durability serve`` (this file run with
``--service``: the service of ``durability.service.daemon.run_foreground``,
with ``Store.record_checkpoint`` timed, the transaction that writes a
checkpoint's row, so its p50/p99 are the store's own, fsync of the commit
included).  Each agent is a git worktree of its own and a loop: edit a file,
run the hook as Claude Code does (``durability snapshot-hook`` with a
PostToolUse payload on stdin), wait for it, again.  The PostgreSQL server
is a throwaway one with fsync on (``bench_store.Server``).

The fleet is swept over ``--services`` (1, 2, 4, 8 by default, 8 agents
each); per size, over ``--seconds`` of calls:

* captures/s: checkpoint rows written in the window (PostgreSQL's count);
* the hook's wall time (p50/p99) as the agent sees it;
* the row write (p50/p99) inside the services;
* where the time goes: the machine's CPU (both cores, from /proc/stat), the
  share of it that PostgreSQL's processes and the services took, the load
  average; PostgreSQL's backends sampled every 50 ms by what they wait on
  (``pg_stat_activity``: a lock, a WAL write or flush, the client, or idle
  in a transaction: waiting for its client's next statement), which
  advisory lock those waiting on one want (``pg_locks``: the schema's, or a
  run's or request's, docs/decisions/0059), and its WAL syncs and their time
  (``pg_stat_wal``, ``track_wal_io_timing`` on).

``--mode rows`` replaces the hooks by threads that call
``Store.record_checkpoint`` directly in each service process (8 a machine):
PostgreSQL's own ceiling, without the hook's and the capture's CPU.

Usage: ``.venv/bin/python bench/bench_fleet.py [--services 1,2,4,8]
[--agents 8] [--seconds 20] [--mode hooks|rows|both]``.  Not a test: it
asserts nothing about speed.  The machine may be shared: the load average is
printed with every line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: Where a service writes its row-write times (seconds, one a line) at exit.
TIMES = "record-times.txt"


# -- the service process (--service) ------------------------------------------


def _timed_store(out: list[float]) -> None:
    """Time every ``Store.record_checkpoint`` of this process."""
    from durability.store.store import Store

    inner = Store.record_checkpoint

    def record_checkpoint(self: Any, new: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(self, new)
        finally:
            out.append(time.perf_counter() - started)

    Store.record_checkpoint = record_checkpoint  # type: ignore[method-assign]


def service_main() -> None:
    from durability.config import Settings
    from durability.service.daemon import run_foreground

    times: list[float] = []
    _timed_store(times)
    settings = Settings.from_env()
    try:
        run_foreground(settings)
    finally:
        (settings.state_dir / TIMES).write_text("".join(f"{t:.6f}\n" for t in times))


def rows_main(agents: int, seconds: float) -> None:
    """``agents`` threads recording checkpoint rows as fast as they can."""
    from durability.config import Settings
    from durability.store import AttemptKey, NewCheckpoint, Store

    times: list[float] = []
    _timed_store(times)
    settings = Settings.from_env()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    start = threading.Barrier(agents)
    end = time.monotonic() + seconds + 1.0

    def agent(i: int) -> None:
        key = AttemptKey(f"rows-{settings.host_id}-{i}", "session", 0, 1)
        with Store(settings.database) as store:
            start.wait()
            n = 0
            while time.monotonic() < end:
                n += 1
                store.record_checkpoint(NewCheckpoint(
                    key=key, commit_id=f"{n:08x}{uuid.uuid4().hex}",
                    worktree=f"/fleet/{settings.host_id}/{i}", source="hook",
                    request_id=uuid.uuid4().hex, harness="claude"))

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(agents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (settings.state_dir / TIMES).write_text("".join(f"{t:.6f}\n" for t in times))


# -- the driver ---------------------------------------------------------------


def _ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000


def _cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _proc_jiffies(pids: list[int], children: bool = False) -> int:
    """CPU of ``pids`` (with ``children``: of the children they reaped too,
    the git a service runs)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
        if children:
            total += int(fields[13]) + int(fields[14])  # cutime + cstime
    return total


def _postgres_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


class Fleet:
    def __init__(self, root: Path, url: str, services: int, agents: int,
                 durability: str) -> None:
        self.root, self.url, self.n, self.agents = root, url, services, agents
        self.durability = durability
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("DURABILITY_", "JJ_")) and k != "PYTHONDONTWRITEBYTECODE"}
        self.envs = []
        for s in range(services):
            home = root / f"m{s}"
            (home / "run").mkdir(parents=True)
            self.envs.append({**base, "DURABILITY_HOME": str(home / "state"),
                              "DURABILITY_SOCKET": str(home / "run" / "s.sock"),
                              "DURABILITY_SPOOL_DIR": str(home / "spool"),
                              "DURABILITY_DATABASE_URL": url,
                              "DURABILITY_HOST_ID": f"fleet-{s}",
                              "DURABILITY_AUTOSTART": "0",
                              "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
        self.procs: list[subprocess.Popen[bytes]] = []

    def repos(self) -> list[list[Path]]:
        made = []
        for s in range(self.n):
            row = []
            for a in range(self.agents):
                repo = self.root / f"m{s}" / f"agent{a}"
                repo.mkdir(parents=True)
                for i in range(20):
                    (repo / f"f{i}.txt").write_text(f"file {i}\n")
                subprocess.run(["git", "init", "-q", str(repo)], check=True,
                               env=self.envs[s])
                row.append(repo)
            made.append(row)
        return made

    def start_services(self) -> None:
        from durability.ground import client

        for env in self.envs:
            with open(Path(env["DURABILITY_HOME"]).parent / "service.log", "ab") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, __file__, "--service"], env=env,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True))
        deadline = time.monotonic() + 60
        for env in self.envs:
            sock = Path(env["DURABILITY_SOCKET"])
            while True:
                try:
                    client.call(sock, {"v": 1, "op": "ping"}, timeout_s=2)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        sys.exit(f"bench: service at {sock} never answered")
                    time.sleep(0.1)

    def stop_services(self) -> list[float]:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait(120)
        times: list[float] = []
        for env in self.envs:
            path = Path(env["DURABILITY_HOME"]) / TIMES
            if path.exists():
                times += [float(x) for x in path.read_text().split()]
        return times


class Sampler(threading.Thread):
    """pg_stat_activity, every 50 ms: what each active backend waits on."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.waits: Counter[str] = Counter()
        self.locks: Counter[str] = Counter()
        self.samples = 0
        from durability.store.postgres import connect

        probe = connect(url, busy_timeout_ms=1000)
        key = probe.lock_key & 0xFFFFFFFFFFFFFFFF  # pg_locks: its high and low 32 bits
        probe.close()
        self.schema_key = (key >> 32, key & 0xFFFFFFFF)
        # PostgreSQL's CPU: every postgres process's jiffies, first and last
        # seen (a backend born in the window starts from 0; one that exits
        # keeps its last sample, up to 50 ms short).
        self.first = {pid: _proc_jiffies([pid]) for pid in _postgres_pids()}
        self.last = dict(self.first)

    def pg_jiffies(self) -> int:
        return sum(self.last[p] - self.first.get(p, 0) for p in self.last)

    def _look(self) -> None:
        for pid in _postgres_pids():
            got = _proc_jiffies([pid])
            if got:
                self.last[pid] = got

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                # A backend idle in a transaction waits for its client's next
                # statement: the client has not had the CPU back yet.
                rows = conn.execute(
                    "SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type, 'CPU') "
                    "|| ':' || coalesce(wait_event, 'running') ELSE 'Client:idle in "
                    "transaction' END FROM pg_stat_activity WHERE state IN ('active', "
                    "'idle in transaction') AND backend_type = 'client backend' AND "
                    "pid <> pg_backend_pid()").fetchall()
                self.samples += 1
                for (what,) in rows:
                    self.waits[what] += 1
                # Which advisory lock the waiting backends want: the schema's
                # (exclusive: a wide write; shared: a checkpoint's, waiting
                # for a wide one) or a run's or request's (decision 0059).
                for classid, objid, mode in conn.execute(
                        "SELECT classid, objid, mode FROM pg_locks WHERE locktype = 'advisory' "
                        "AND NOT granted").fetchall():
                    schema = (int(classid), int(objid)) == self.schema_key
                    self.locks[f"{'schema' if schema else 'run/request'} {mode}"] += 1
                self._look()
                self.stop.wait(0.05)
            self._look()


def _wal(url: str) -> tuple[int, float, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT wal_sync, wal_sync_time, wal_write FROM pg_stat_wal"
                           ).fetchone()
    assert row is not None
    return int(row[0]), float(row[1]), int(row[2])


def _count(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM workspace_checkpoints").fetchone()
    assert row is not None
    return int(row[0])


def _hook_loop(repo: Path, env: dict[str, str], durability: str, stop: threading.Event,
               walls: list[float], failures: list[str]) -> None:
    session = f"fleet-{env['DURABILITY_HOST_ID']}-{repo.name}"
    n = 0
    while not stop.is_set():
        n += 1
        target = repo / f"f{n % 20}.txt"
        target.write_text(f"edit {n} {uuid.uuid4().hex}\n")
        payload = json.dumps({
            "session_id": session, "cwd": str(repo), "permission_mode": "default",
            "transcript_path": str(repo.parent / f"{repo.name}.jsonl"),
            "hook_event_name": "PostToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": str(target), "old_string": "a", "new_string": "b"},
            "tool_response": {"filePath": str(target), "userModified": False},
            "tool_use_id": f"toolu_{repo.name}_{n:06d}"}).encode()
        started = time.perf_counter()
        done = subprocess.run([durability, "snapshot-hook"], input=payload, env=env,
                              capture_output=True, check=False)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0 or done.stdout or done.stderr:
            failures.append(done.stderr.decode(errors="replace")[-300:])


def measure(root: Path, url: str, services: int, agents: int, seconds: float, mode: str,
            durability: str) -> dict[str, Any]:
    fleet = Fleet(root, url, services, agents, durability)
    walls: list[float] = []
    failures: list[str] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    rows_procs: list[subprocess.Popen[bytes]] = []
    if mode == "hooks":
        repos = fleet.repos()
        fleet.start_services()
        # Warm: each agent's first capture (a fresh private index) is not the loop's.
        warm = [threading.Thread(target=_once, args=(repos[s][a], fleet.envs[s], durability,
                                                     failures))
                for s in range(services) for a in range(agents)]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        threads = [threading.Thread(target=_hook_loop, args=(repos[s][a], fleet.envs[s],
                                                             durability, stop, walls, failures))
                   for s in range(services) for a in range(agents)]
    before_rows, before_wal = _count(url), _wal(url)
    load_before = os.getloadavg()
    sampler = Sampler(url)
    sampler.start()
    cpu0 = _cpu()
    svc0 = _proc_jiffies([p.pid for p in fleet.procs], children=True)
    child0 = os.times()
    started = time.perf_counter()
    if mode == "hooks":
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
    else:
        for env in fleet.envs:
            rows_procs.append(subprocess.Popen(
                [sys.executable, __file__, "--rows", str(agents), str(seconds)], env=env))
        for p in rows_procs:
            p.wait(seconds + 120)
    elapsed = time.perf_counter() - started
    cpu1 = _cpu()
    svc1 = _proc_jiffies([p.pid for p in fleet.procs], children=True)
    child1 = os.times()
    sampler.stop.set()
    sampler.join()
    after_rows, after_wal = _count(url), _wal(url)
    load_after = os.getloadavg()
    if mode == "hooks":
        times = fleet.stop_services()
    else:
        times = []
        for env in fleet.envs:
            path = Path(env["DURABILITY_HOME"]) / TIMES
            times += [float(x) for x in path.read_text().split()]
    hz = os.sysconf("SC_CLK_TCK")
    busy = (cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1)
    cores = os.cpu_count() or 1
    machine_s = (cpu1[1] - cpu0[1]) / hz  # every core's time in the window
    hooks_s = ((child1.children_user + child1.children_system)
               - (child0.children_user + child0.children_system))
    return {
        "services": services, "agents": services * agents, "seconds": elapsed,
        "rows": after_rows - before_rows,
        "captures_per_s": (after_rows - before_rows) / elapsed,
        "hook_p50_ms": _ms(walls, 0.5), "hook_p99_ms": _ms(walls, 0.99),
        "write_p50_ms": _ms(times, 0.5), "write_p99_ms": _ms(times, 0.99),
        "writes": len(times), "failures": len(failures),
        "failure": failures[0] if failures else None,
        "cpu_busy": busy, "cores": cores,
        "pg_cpu": sampler.pg_jiffies() / hz / machine_s if machine_s else 0.0,
        "svc_cpu": (svc1 - svc0) / hz / machine_s if machine_s else 0.0,
        "clients_cpu": hooks_s / machine_s if machine_s else 0.0,
        "load": (load_before[0], load_after[0]),
        "waits": dict(sampler.waits.most_common(6)), "samples": sampler.samples,
        "lock_waits": dict(sampler.locks),
        "wal_syncs": after_wal[0] - before_wal[0],
        "wal_sync_ms": after_wal[1] - before_wal[1],
        "wal_writes": after_wal[2] - before_wal[2],
    }


def _once(repo: Path, env: dict[str, str], durability: str, failures: list[str]) -> None:
    stop = threading.Event()
    walls: list[float] = []

    def after_one() -> None:
        while not walls:
            time.sleep(0.01)
        stop.set()

    threading.Thread(target=after_one, daemon=True).start()
    _hook_loop(repo, env, durability, stop, walls, failures)


def _print(r: dict[str, Any], mode: str) -> None:
    waits = ", ".join(f"{k} {v / max(r['samples'], 1):.2f}" for k, v in r["waits"].items())
    per_sync = r["wal_sync_ms"] / r["wal_syncs"] if r["wal_syncs"] else 0.0
    hook = (f" hook p50 {r['hook_p50_ms']:6.0f} p99 {r['hook_p99_ms']:6.0f} ms |"
            if mode == "hooks" else "")
    print(f"{mode:5} {r['services']:2} x {r['agents'] // r['services']} = {r['agents']:2} "
          f"| {r['captures_per_s']:7.1f}/s ({r['rows']} rows) |{hook} write p50 "
          f"{r['write_p50_ms']:5.1f} p99 {r['write_p99_ms']:6.1f} ms | cpu {r['cpu_busy']:4.0%}"
          f" of {r['cores']} (pg {r['pg_cpu']:4.0%}, services {r['svc_cpu']:4.0%}, "
          f"{'hooks' if mode == 'hooks' else 'writers'} {r['clients_cpu']:4.0%}) | wal syncs "
          f"{r['wal_syncs'] / r['seconds']:5.0f}/s "
          f"{per_sync:4.1f} ms each | load {r['load'][0]:.1f}->{r['load'][1]:.1f} "
          f"| failures {r['failures']}", flush=True)
    print(f"      backends active or in a transaction per sample: {waits or 'none'}", flush=True)
    locks = ", ".join(f"{k} {v / max(r['samples'], 1):.2f}"
                      for k, v in sorted(r["lock_waits"].items()))
    print(f"      advisory locks waited for per sample: {locks or 'none'}", flush=True)
    if r["failure"]:
        print(f"      a failure: {r['failure']!r}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--services", default="1,2,4,8")
    parser.add_argument("--agents", type=int, default=8, help="agents per service")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--mode", choices=("hooks", "rows", "both"), default="both")
    parser.add_argument("--json", type=Path, help="also write every result here")
    args = parser.parse_args()
    from bench_store import Server

    durability = shutil.which("durability", path=str(Path(sys.executable).parent)) or \
        shutil.which("durability")
    if durability is None:
        sys.exit("bench: the durability command is not installed")
    server = Server()
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET track_wal_io_timing = on")
        conn.execute("SELECT pg_reload_conf()")
        version = conn.execute("SHOW server_version").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    work = Path(tempfile.mkdtemp(prefix="dur-fleet-"))
    results = []
    modes = ["hooks", "rows"] if args.mode == "both" else [args.mode]
    print(f"PostgreSQL {version[0] if version else '?'} (fsync {fsync[0] if fsync else '?'}), "
          f"{os.cpu_count()} cores, {args.seconds:g} s a size, load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    try:
        for mode in modes:
            for n in [int(x) for x in args.services.split(",")]:
                url = server.fresh()
                from durability.store import Store

                Store(url).close()  # migrated once, before the fleet
                root = work / f"{mode}-{n}"
                root.mkdir()
                got = measure(root, url, n, args.agents, args.seconds, mode, durability)
                got["mode"] = mode
                results.append(got)
                _print(got, mode)
                shutil.rmtree(root, ignore_errors=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--service":
        service_main()
    elif len(sys.argv) > 1 and sys.argv[1] == "--rows":
        rows_main(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
