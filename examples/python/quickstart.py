"""Meridian from redis-py, unchanged: the commands an application uses most, against any node.

    meridian demo                     # in one terminal
    python3 examples/python/quickstart.py --port 6380

Needs redis-py (`pip install redis`, or Debian's `python3-redis`). Exits non-zero if Meridian answers
anything other than what Redis would.
"""

import argparse
import sys
import time

import redis


def check(what, got, expected):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")
    print(f"ok  {what}: {got!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6380)
    args = parser.parse_args()

    r = redis.Redis(host=args.host, port=args.port, decode_responses=True)
    check("PING", r.ping(), True)

    # Strings, counters and conditional writes.
    key = f"py:{time.time_ns()}"
    check("SET", r.set(key, "hello"), True)
    check("GET", r.get(key), "hello")
    check("SET NX on a present key", r.set(key, "again", nx=True), None)
    check("APPEND", r.append(key, " world"), 11)
    check("GETDEL", r.getdel(key), "hello world")
    check("INCR", r.incr(f"{key}:n"), 1)
    check("INCRBY", r.incrby(f"{key}:n", 41), 42)
    try:
        r.incr(key + ":word") if r.set(key + ":word", "x") else None
        sys.exit("INCR of a non-integer should have failed")
    except redis.ResponseError as e:
        check("INCR of a non-integer", str(e), "value is not an integer or out of range")

    # Many keys at once, and a pipeline (one round trip, replies in order).
    check("MSET", r.mset({f"{key}:a": "1", f"{key}:b": "2"}), True)
    check("MGET", r.mget(f"{key}:a", f"{key}:b", f"{key}:none"), ["1", "2", None])
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"{key}:p{i}", i)
    pipe.get(f"{key}:p99")
    check("pipeline of 101", pipe.execute()[-1], "99")

    # Expiry.
    check("SET EX", r.set(f"{key}:t", "v", ex=100), True)
    ttl = r.ttl(f"{key}:t")
    check("TTL within the minute just set", 90 <= ttl <= 100, True)
    check("PERSIST", r.persist(f"{key}:t"), True)
    check("TTL after PERSIST", r.ttl(f"{key}:t"), -1)

    # Keyspaces: SELECT by number, or Meridian's KEYSPACE by name (`meridian ctl keyspace create`).
    check("SELECT 0", r.execute_command("SELECT", 0), True)
    check("DEL", r.delete(f"{key}:a", f"{key}:b", f"{key}:none"), 2)
    print("all good")


if __name__ == "__main__":
    main()
