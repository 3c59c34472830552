#!/usr/bin/env python3
"""Sizes that keep code readable: no file in agent/ over 450 lines, and no
function in production code (agent/, common/, crypto/, model/, protocol/,
store/) over 80 lines. What was over when the rule came is listed, with its
size then, in tests/code_size_allowance.txt: an entry may shrink, never
grow, and one no longer over must leave the list. Anything else over fails,
named with its size.

Functions are found from the text, as the code is laid out here: a body's
brace opened at namespace or class scope after a parameter list (or a
constructor's initializers). Usage: code_size_test.py ROOT ALLOWANCE
"""
import os
import re
import sys

MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
FILE_ROOTS = ("agent",)
FUNCTION_ROOTS = ("agent", "common", "crypto", "model", "protocol", "store")


def code_only(text):
    """The text with comments, strings and character literals blanked,
    lines kept where they were."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        at_line_start = i == 0 or text[i - 1] == "\n"
        if at_line_start and text[i:i + 64].lstrip(" \t").startswith("#"):
            j = i  # a preprocessor line, with its continuations
            while True:
                k = text.find("\n", j)
                if k < 0 or text[k - 1] != "\\":
                    break
                j = k + 1
            j = n if k < 0 else k
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FUNCTION_HEAD = re.compile(r"\)\s*(const|override|final|noexcept|mutable|\s)*(->\s*[^{;]+)?$")
SCOPE_HEAD = re.compile(r"^(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")


def function_name(head):
    before = head[:head.find("(")] if "(" in head else head
    words = re.findall(r"[~\w:]+(?:<[^()]*>)?|operator\S+", before)
    return words[-1] if words else head.strip()[:40]


def functions(path):
    """(name, first line, lines) of each function body in the file."""
    text = code_only(open(path, encoding="utf-8").read())
    found = []
    stack = []  # per open brace: "scope", "function", "block" or "init"
    head = []
    line = 1
    for c in text:
        if c == "\n":
            line += 1
            head.append(" ")
        elif c == "{":
            statement = "".join(head).strip()
            at_scope = all(entry[0] == "scope" for entry in stack)
            if SCOPE_HEAD.match(statement):
                kind = "scope"
            elif at_scope and statement and (statement[-1].isalnum() or statement[-1] in "_>") and ") :" in statement:
                kind = "init"  # a member's brace initializer in a constructor's list
            elif at_scope and (FUNCTION_HEAD.search(statement) or (statement.endswith("}") and ") :" in statement)) \
                    and not re.search(r"=\s*[^=]", re.sub(r"\([^()]*\)", "", statement)):
                kind = "function"
            else:
                kind = "block"
            stack.append((kind, line, statement))
            if kind != "init":
                head = []
        elif c == "}":
            if stack:
                kind, first, statement = stack.pop()
                if kind == "function":
                    found.append((function_name(statement), first, line - first + 1))
                if kind == "init":
                    head.append("{}")
                    continue
            head = []
        elif c == ";":
            head = []
        else:
            head.append(c)
    return found


def sources(root, folders, extensions):
    for folder in folders:
        for directory, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith(extensions):
                    yield os.path.relpath(os.path.join(directory, name), root)


def measure(root):
    """{key: size} of everything over its limit."""
    over = {}
    for path in sources(root, FILE_ROOTS, (".cc", ".h")):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > MAX_FILE_LINES:
            over[f"file {path}"] = lines
    for path in sources(root, FUNCTION_ROOTS, (".cc",)):
        for name, first, lines in functions(os.path.join(root, path)):
            if lines > MAX_FUNCTION_LINES:
                key = f"function {path} {name}"
                over[key] = max(lines, over.get(key, 0))
    return over


def read_allowance(path):
    allowed = {}
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            key, _, size = text.rpartition(" ")
            if not key or not size.isdigit():
                sys.exit(f"{path}:{number}: expected 'file PATH LINES' or 'function PATH NAME LINES', got: {text}")
            allowed[key] = int(size)
    return allowed


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: code_size_test.py ROOT ALLOWANCE")
    root, allowance = sys.argv[1], sys.argv[2]
    over = measure(root)
    allowed = read_allowance(allowance)
    problems = []
    for key, size in sorted(over.items()):
        limit = MAX_FILE_LINES if key.startswith("file ") else MAX_FUNCTION_LINES
        if key not in allowed:
            problems.append(f"{key}: {size} lines, over {limit}")
        elif size > allowed[key]:
            problems.append(f"{key}: {size} lines, grown past its allowance of {allowed[key]} (limit {limit})")
    for key in sorted(allowed):
        if key not in over:
            problems.append(f"{key}: no longer over its limit; take it out of {os.path.basename(allowance)}")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"no file or function over its limit beyond the {len(allowed)} allowed, none of them grown")


if __name__ == "__main__":
    main()
