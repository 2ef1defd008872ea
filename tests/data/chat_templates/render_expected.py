#!/usr/bin/env python3
"""Renders conversations.json with each reference chat template here (*.jinja, as the models ship them)
through Python's jinja2 set up as transformers' apply_chat_template sets it up, into
<template>.<conversation>.expected: the renders tests/test_tools.cpp compares ember's with.
Run from this folder after changing a conversation or adding a template: python3 render_expected.py"""
import glob
import json
import os

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def as_transformers(conv):
    """The conversation as transformers receives it from an OpenAI-style client."""
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["parameters"]}} for t in conv["tools"]]
    messages = []
    for m in conv["messages"]:
        out = {k: v for k, v in m.items() if k != "tool_calls"}
        if "tool_calls" in m:
            out["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in m["tool_calls"]]
        messages.append(out)
    return tools or None, messages


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    convs = json.load(open(os.path.join(here, "conversations.json")))
    env = environment()
    for path in sorted(glob.glob(os.path.join(here, "*.jinja"))):
        name = os.path.basename(path)[:-len(".jinja")]
        template = env.from_string(open(path).read())
        for conv in convs:
            if "only" in conv and name not in conv["only"]:
                continue
            tools, messages = as_transformers(conv)
            variables = dict(messages=messages, tools=tools, add_generation_prompt=conv["add_generation_prompt"],
                             bos_token="<s>", eos_token="</s>", documents=None)
            if "enable_thinking" in conv:
                variables["enable_thinking"] = conv["enable_thinking"]
            text = template.render(**variables)
            with open(os.path.join(here, f"{name}.{conv['name']}.expected"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
