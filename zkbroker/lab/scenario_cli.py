"""`zkbroker lab scenario list|show|run` (DESIGN §10) and their terminal output.

With `--json` stdout holds only the JSON and the narration goes to stderr. `run` exits 0 when every run
matched its expectation, 1 otherwise (and 130 when interrupted, after tearing its labs down). A scenario file
with a mistake (`check`, or `run` before anything starts) is one `FILE:LINE: ...` line and exit status 2
(DESIGN §20).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from zkbroker.lab.lab_security import PROTOCOLS
from zkbroker.lab.scenario import KRAFT_MODES, Scenario, ScenarioError, catalogue, find_scenario, load_scenario

MODE_CHOICES = ("0.8", "fixed", "both")
#: `lab scenario run --mode`: a KRaft mode (DESIGN §17) or all of a scenario's modes too.
RUN_MODE_CHOICES = ("0.8", "fixed", "kraft", "kraft-fixed", "both", "all")


def add_scenario_commands(actions: argparse._SubParsersAction) -> None:
    scenario = actions.add_parser("scenario", help="replay a ZooKeeper-era failure in its 0.8 and fixed forms")
    commands = scenario.add_subparsers(dest="scenario_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="the catalogue: each scenario's name, source and one line")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    listing.set_defaults(run=_list)
    show = commands.add_parser("show", help="a scenario's modes, expectations and steps")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(run=_show)
    check = commands.add_parser("check", help="check a scenario file without starting anything")
    check.add_argument("file", metavar="F")
    check.set_defaults(run=_check)
    run = commands.add_parser("run", help="run a scenario on labs of its own and check what happened")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("name", metavar="NAME", nargs="?", help="a catalogue scenario")
    which.add_argument("--file", metavar="F", help="a scenario file of your own")
    run.add_argument("--mode", choices=RUN_MODE_CHOICES, default="both",
                     help="0.8, fixed, kraft, kraft-fixed, both (0.8 and fixed, the default) or all")
    run.add_argument("--seed", type=int, default=0, metavar="N", help="names the records (and drives torture)")
    run.add_argument("--dir", metavar="DIR", help="where the lab goes (both modes: DIR/0.8 and DIR/fixed); "
                                                   "default: a temporary directory")
    run.add_argument("--keep", action="store_true", help="leave the lab running at the end")
    run.add_argument("--step", action="store_true", help="wait for Enter before each step")
    run.add_argument("--json", action="store_true", help="print the verdicts as JSON (narration to stderr)")
    run.add_argument("--security", default="plaintext", choices=PROTOCOLS, metavar="PROTOCOL",
                     help="the lab's listeners, as `lab up --security` (plaintext, ssl, sasl_plaintext, sasl_ssl); "
                          "the run's clients log in as the lab's admin")
    run.set_defaults(run=_run)

    torture = actions.add_parser("torture", help="seeded random faults under acks=all load, checked in both modes")
    torture.add_argument("--runs", type=int, required=True, metavar="N")
    torture.add_argument("--seed", type=int, default=0, metavar="S")
    torture.add_argument("--faults", default=None, metavar="KIND[,KIND...]",
                         help="of kill, pause, partition, zookeeper; in kraft mode of kill, pause, partition (of a "
                              "broker), controller (default: all; partition needs root)")
    torture.add_argument("--mode", choices=(*MODE_CHOICES, "kraft"), default="both",
                         help="0.8, fixed, both (default), or kraft: faults on a KRaft lab's brokers and "
                              "controllers, judged by the checker and the quorum checker's Raft invariants")
    torture.add_argument("--kraft", action="store_true", help="short for --mode kraft")
    torture.add_argument("--json", action="store_true", help="print the totals as JSON (narration to stderr)")
    torture.add_argument("--security", default="plaintext", choices=PROTOCOLS, metavar="PROTOCOL",
                         help="each lab's listeners, as `lab up --security` (ZooKeeper mode)")
    torture.set_defaults(run=_torture)


def _list(args: argparse.Namespace) -> int:
    scenarios = catalogue()
    if args.json:
        print(json.dumps([{"name": s.name, "source": s.source, "summary": s.summary, "modes": list(s.modes)}
                          for s in scenarios], indent=2))
        return 0
    rows = [("NAME", "SOURCE", "MODES", "SUMMARY")]
    # a scenario whose failure has no KRaft form says so where its KRaft modes would be
    rows += [(s.name, s.source, ",".join(s.modes) + (" (no kraft)" if s.no_kraft else ""), s.summary)
             for s in scenarios]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    return 0


def _show(args: argparse.Namespace) -> int:
    print(format_scenario(find_scenario(args.name)))
    return 0


def format_scenario(s: Scenario) -> str:
    from zkbroker.lab.runner import describe_step

    lines = [f"{s.name}: {s.summary}", f"Source: {s.source}",
             f"Cluster: {s.brokers} brokers, " + _quorums(s)
             + (", a lab network (needs root)" if s.network else "")
             + (f"; {_settings(s.config)}" if s.config else "")]
    for mode, spec in s.modes.items():
        lines.append(f"Mode {mode}: expect {spec.expect}" + (f"; {_settings(spec.config)}" if spec.config else ""))
        if spec.why:
            lines.append(f"    {spec.why}")
    if s.why_one_mode:
        lines.append(f"One mode only: {s.why_one_mode}")
    if s.no_kraft:
        lines.append(f"No KRaft form: {s.no_kraft}")
    if s.faithful:
        lines.append(f"How faithful: {s.faithful}")
    lines.append("Steps:")
    for number, step in enumerate(s.steps, start=1):
        only = f" [{', '.join(step.mode)} only]" if step.mode else ""
        lines.append(f"  {number:>2}. {describe_step(step)}{only}")
        if step.narrate:
            lines.append(f"      {step.narrate}")
    return "\n".join(lines)


def _quorums(s: Scenario) -> str:
    """The ZooKeeper ensemble and the KRaft quorum a scenario's modes run on."""
    controllers = f"{s.controllers} KRaft controllers"
    if set(s.modes) <= set(KRAFT_MODES):
        return controllers
    ensemble = f"{s.zookeepers} ZooKeeper server{'s' if s.zookeepers > 1 else ''}"
    return ensemble + (f" ({controllers} in the KRaft modes)" if set(s.modes) & set(KRAFT_MODES) else "")


def _settings(config: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


SCENARIO_MISTAKE = 2  # the exit status of a scenario file that does not load: nothing was started


def _check(args: argparse.Namespace) -> int:
    try:
        scenario = load_scenario(args.file)
    except ScenarioError as e:
        print(e, file=sys.stderr)
        return SCENARIO_MISTAKE
    print(f"{args.file}: {scenario.name}, {len(scenario.steps)} steps, modes {', '.join(scenario.modes)}: ok")
    return 0


def _run(args: argparse.Namespace) -> int:
    from zkbroker.lab.runner import EnterStepper, run_scenario

    try:
        scenario = load_scenario(args.file) if args.file else find_scenario(args.name)
    except ScenarioError as e:
        print(e, file=sys.stderr)
        return SCENARIO_MISTAKE
    out = sys.stderr if args.json else sys.stdout

    def narrate(line: str) -> None:
        print(line, file=out, flush=True)

    _quiet_zookeeper_client()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill` of the runner tears its labs down too
    try:
        result = run_scenario(scenario, args.mode, args.seed, Path(args.dir) if args.dir else None, args.keep,
                              EnterStepper() if args.step else None, narrate, security=args.security)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        print(format_result(result))
    return 0 if result.expected else 1


def format_result(result) -> str:
    rows = [("MODE", "VERDICT", "EXPECTED", "ACKED", "LOST", "DUPLICATED", "DIVERGENT", "UNAVAILABLE_MS_MAX", "TIME_S")]
    for run in result.runs:
        j = run.as_json()
        rows.append((run.mode, run.verdict, "yes" if run.expected else f"NO (expected {run.expect})",
                     str(j["acknowledged"]), str(j["lost"]), str(j["duplicated"]), str(j["divergent"]),
                     str(j["unavailable_ms_max"]), f"{run.seconds:.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["", f"{result.scenario} (seed {result.seed})"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    for run in result.runs:
        for loss in run.report.losses[:10]:
            lines.append(f"  {run.mode}: lost {loss.cause}")
        if len(run.report.losses) > 10:
            lines.append(f"  {run.mode}: ... and {len(run.report.losses) - 10} more lost")
        for divergence in run.report.divergences[:3]:
            lines.append(f"  {run.mode}: {divergence.topic}-{divergence.partition} offset {divergence.offset} differs "
                         f"between brokers {', '.join(map(str, divergence.values))}")
        for read in run.report.read_divergences[:3]:
            lines.append(f"  {run.mode}: {read.cause}")
        for violation in (run.quorum or {}).get("violations", [])[:5]:
            lines.append(f"  {run.mode}: Raft {violation['invariant']}: {violation['detail']}")
        for what in run.stuck + run.slow + run.failures:
            lines.append(f"  {run.mode}: {what}")
    if len(result.runs) == 2:
        lines.append(difference(*result.runs))
    return "\n".join(lines)


def difference(old, fixed) -> str:
    """One sentence on what the fix changed."""
    a, b = old.as_json(), fixed.as_json()
    if a["verdict"] == b["verdict"]:
        return f"Both modes end {a['verdict']}."
    parts = []
    for key, words in (("lost", "acknowledged records lost"),
                       ("divergent", "offsets where replicas (or a read and the log) diverge"),
                       ("duplicated", "duplicated records")):
        if a[key] != b[key]:
            parts.append(f"{words}: {a[key]} in 0.8 mode, {b[key]} fixed")
    detail = f" ({'; '.join(parts)})" if parts else ""
    return f"The difference: 0.8 mode ends {a['verdict']}, fixed mode {b['verdict']}{detail}."


def _torture(args: argparse.Namespace) -> int:
    import os

    from zkbroker.lab import kraft_torture, torture

    if args.runs < 1:
        raise ValueError("--runs takes a number of runs, at least 1")
    kraft = args.kraft or args.mode == "kraft"
    if kraft and args.security != "plaintext":
        raise ValueError("--security is for ZooKeeper mode: a KRaft lab runs PLAINTEXT listeners only")
    kinds = kraft_torture.FAULT_KINDS if kraft else torture.FAULT_KINDS
    if args.faults is None:
        faults = tuple(k for k in kinds if k != "partition" or os.geteuid() == 0)
    else:
        faults = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    out = sys.stderr if args.json else sys.stdout
    _quiet_zookeeper_client()
    previous = signal.signal(signal.SIGTERM, _interrupt)

    def narrate(line: str) -> None:
        print(line, file=out, flush=True)
    try:
        result = kraft_torture.run_kraft_torture(args.runs, args.seed, faults, narrate) if kraft else \
            torture.run_torture(args.runs, args.seed, faults, args.mode, narrate,
                                security=args.security)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        print(format_torture(result))
    return 0 if result.expected else 1


def format_torture(result) -> str:
    lines = ["", f"torture: {result.runs} runs, seed {result.seed}, faults {','.join(result.faults)}"]
    rows = [("MODE", "RUNS", "VERDICTS", "ACKED", "LOST", "DUPLICATED", "DIVERGENT", "UNAVAILABLE_MS_MAX")]
    for t in result.totals.values():
        j = t.as_json()
        rows.append((t.mode, str(t.runs), ",".join(f"{v}:{n}" for v, n in j["verdicts"].items()),
                     str(t.acknowledged), str(t.lost), str(t.duplicated), str(t.divergent),
                     str(j["unavailable_ms_max"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    for t in result.totals.values():
        for kind, figures in t.as_json()["unavailable_ms_by_fault"].items():
            lines.append(f"  {t.mode}: unavailability after {kind}: median {figures['median']} ms, "
                         f"max {figures['max']} ms ({figures['faults']} faults)")
        j = t.as_json()
        if t.mode == "kraft":
            lines.append(f"  kraft: the quorum: {j['metadata_committed']} metadata records committed and checked on "
                         f"every voter, {len(j['raft_violations'])} Raft violations")
            for kind, figures in j["leaderless_ms_by_fault"].items():
                lines.append(f"  kraft: without a quorum leader after {kind}: median {figures['median']} ms, "
                             f"max {figures['max']} ms ({figures['faults']} faults)")
            lines += [f"  {v['run']}: {v['invariant']}: {v['detail']}" for v in j["raft_violations"]]
        for stuck in j["stuck"]:
            lines.append(f"  {t.mode} stuck ({stuck['run']}): {stuck['why']}")
        if t.mode in ("fixed", "kraft") and not t.expected:
            lines.append(f"  {t.mode}: the safe configuration lost acknowledged records or diverged"
                         + (" or broke a Raft invariant" if t.mode == "kraft" else ""))
    return "\n".join(lines)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt()


def _quiet_zookeeper_client() -> None:
    """kazoo warns of every refused connection; in a scenario they are the faults at work."""
    kazoo = logging.getLogger("kazoo")
    kazoo.addHandler(logging.NullHandler())
    kazoo.propagate = False


__all__ = ["ScenarioError", "add_scenario_commands", "format_result", "format_scenario"]
