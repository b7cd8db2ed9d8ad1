#!/usr/bin/env python3
"""Validates a JSON document against an AWS operation's output shape in botocore's service model.

    botocore_shape.py SERVICE OPERATION FILE.json      (exit 0 when valid; problems on stdout)

e.g. `botocore_shape.py bedrock-runtime ApplyGuardrail response.json`. Checks what the model
says of every member: required members, types, enum values, string and list lengths, string
patterns, and members the model does not have. botocore ships with boto3.

One liberty, said out loud: the runtime model writes a rule identifier as `[a-z0-9]{12}`
while the control plane (where the ids are defined) requires `[A-Z][0-9A-Z]{11}`, so
`AutomatedReasoningRuleIdentifier` is matched ignoring case.
"""
import json
import re
import sys

import botocore.session

CASE_INSENSITIVE = {"AutomatedReasoningRuleIdentifier"}


def check(shape, value, path, problems):
    t = shape.type_name
    meta = shape.metadata
    if t == "structure":
        if not isinstance(value, dict):
            problems.append(f"{path}: expected an object ({shape.name}), got {type(value).__name__}")
            return
        members = shape.members
        if meta.get("union") and len(value) != 1:
            problems.append(f"{path}: union {shape.name} must have exactly one member, has {list(value)}")
        for name in shape.required_members:
            if name not in value:
                problems.append(f"{path}: missing required member `{name}` of {shape.name}")
        for k, v in value.items():
            if k not in members:
                problems.append(f"{path}: `{k}` is not a member of {shape.name}")
                continue
            check(members[k], v, f"{path}.{k}", problems)
    elif t == "list":
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list ({shape.name})")
            return
        if "min" in meta and len(value) < meta["min"]:
            problems.append(f"{path}: {len(value)} items, at least {meta['min']} required")
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} items, at most {meta['max']} allowed")
        for i, v in enumerate(value):
            check(shape.member, v, f"{path}[{i}]", problems)
    elif t == "map":
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map ({shape.name})")
            return
        for k, v in value.items():
            check(shape.value, v, f"{path}.{k}", problems)
    elif t == "string":
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string ({shape.name}), got {value!r}")
            return
        if "enum" in meta and value not in meta["enum"]:
            problems.append(f"{path}: {value!r} is not one of {meta['enum']}")
        if "min" in meta and len(value) < meta["min"]:
            problems.append(f"{path}: {len(value)} characters, at least {meta['min']} required")
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} characters, at most {meta['max']} allowed")
        if "pattern" in meta:
            flags = re.IGNORECASE if shape.name in CASE_INSENSITIVE else 0
            if not re.fullmatch(meta["pattern"], value, flags):
                problems.append(f"{path}: {value!r} does not match {meta['pattern']} ({shape.name})")
    elif t in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{path}: expected an integer ({shape.name}), got {value!r}")
            return
        if "min" in meta and value < meta["min"]:
            problems.append(f"{path}: {value} below the minimum {meta['min']}")
        if "max" in meta and value > meta["max"]:
            problems.append(f"{path}: {value} above the maximum {meta['max']}")
    elif t in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{path}: expected a number ({shape.name}), got {value!r}")
            return
        if "min" in meta and value < meta["min"]:
            problems.append(f"{path}: {value} below the minimum {meta['min']}")
        if "max" in meta and value > meta["max"]:
            problems.append(f"{path}: {value} above the maximum {meta['max']}")
    elif t == "boolean":
        if not isinstance(value, bool):
            problems.append(f"{path}: expected a boolean ({shape.name}), got {value!r}")
    elif t == "timestamp":
        if not isinstance(value, (str, int, float)):
            problems.append(f"{path}: expected a timestamp ({shape.name}), got {value!r}")


def main():
    service, operation, file = sys.argv[1:4]
    model = botocore.session.get_session().get_service_model(service)
    shape = model.operation_model(operation).output_shape
    with open(file, encoding="utf-8") as f:
        value = json.load(f)
    problems = []
    check(shape, value, "$", problems)
    for p in problems:
        print(p)
    print(f"{service} {operation}: {len(problems)} problem(s), botocore {botocore.__version__}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
