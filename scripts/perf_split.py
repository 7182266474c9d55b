#!/usr/bin/env python3
"""Where a server's CPU time goes, from a `perf record -g` profile.

Analysis only (the measurements themselves are `connlab sweep` files). It
splits the samples of one process into the work every server must do for a
request on TCP, and what its I/O model and code add on top:

  tcp-send   inclusive share of tcp_sendmsg (with loopback, the delivery into
             the peer's socket runs here too: the softirq of the transmit)
  tcp-recv   inclusive share of tcp_recvmsg (copy to the caller, ACK work)
  splice     inclusive share of splice_to_socket / tcp_splice_read
  sleep      inclusive share of schedule (blocking in the wait and waking)
  user       samples in user space (the program and its libraries)
  rest       everything else in the kernel: system call entry, readiness
             (epoll, poll, io_uring's rings and task work), timers

The first three are the floor no I/O model removes; `overhead / floor` says
how far a program is from it, and two programs' floors bound the ratio any
change of I/O model can reach.

  perf record -e cpu-clock -F 4000 -g -p PID -o server.data -- sleep 4
  scripts/perf_split.py server.data [more.data ...]
"""
import argparse
import os

import subprocess

FLOOR = {
    "tcp-send": ["tcp_sendmsg"],
    "tcp-recv": ["tcp_recvmsg"],
    "splice": ["splice_to_socket", "tcp_splice_read"],
}


def inclusive(data: str) -> dict[str, float]:
    """Symbol -> inclusive (children) percentage of the profile's samples."""
    out = subprocess.run(
        ["perf", "report", "-i", data, "--children", "--sort", "sym",
         "--stdio", "-g", "none"],
        capture_output=True, text=True, check=True).stdout
    shares: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith("%") and parts[2] in ("[k]", "[.]"):
            shares.setdefault(parts[3], float(parts[0].rstrip("%")))
    return shares


def kernel_share(data: str) -> float:
    """Percentage of the samples taken in the kernel."""
    out = subprocess.run(
        ["perf", "report", "-i", data, "--no-children", "--sort", "dso",
         "--stdio"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] == "[kernel.kallsyms]":
            return float(parts[0].rstrip("%"))
    return 0.0


def split(data: str) -> dict[str, float]:
    """The shares described in the module documentation, in percent."""
    shares = inclusive(data)
    row = {name: sum(shares.get(s, 0.0) for s in syms) for name, syms in FLOOR.items()}
    row["sleep"] = shares.get("schedule", 0.0)
    row["user"] = 100.0 - kernel_share(data)
    row["rest"] = max(0.0, 100.0 - sum(row.values()))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", metavar="PROFILE.data",
                        help="perf record -g output files")
    args = parser.parse_args()
    for data in args.profiles:
        if not os.path.isfile(data):
            parser.error(f"{data}: no such profile")
    names = ["tcp-send", "tcp-recv", "splice", "sleep", "user", "rest"]
    print("profile," + ",".join(names) + ",overhead_over_floor")
    for data in args.profiles:
        row = split(data)
        floor = row["tcp-send"] + row["tcp-recv"] + row["splice"]
        over = (100.0 - floor) / floor if floor else float("nan")
        print(data + "," + ",".join(f"{row[n]:.1f}" for n in names) + f",{over:.2f}")


if __name__ == "__main__":
    main()
