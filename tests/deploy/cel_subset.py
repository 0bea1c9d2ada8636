# SPDX-License-Identifier: Apache-2.0
# cel_subset.py: a parser and evaluator for the subset of CEL (github.com/google/cel-spec)
# that deployments/kustomize/components/admission uses: literals, identifiers, member access,
# indexing, calls and receiver calls, the macros has/all/exists/filter/map, ! - * / % + -
# comparisons, `in`, && || and ?:, plus Kubernetes' quantity() and the strings extension's
# split/join, and the string functions endsWith/startsWith/contains. It is NOT the real CEL (no type checking, no cost limits, a tiny quantity
# parser): it proves the expressions are well formed and behave as intended on sample
# objects; the API server's CEL compiler is the final word (docs/deploy.md says so).
import re

TOKEN = re.compile(r"""\s*(?:(?P<num>\d+)|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|
    (?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}]))""",
                   re.X)
MACROS = {"all", "exists", "filter", "map", "exists_one"}


class CelError(Exception):
    pass


def tokenize(src):
    pos, out = 0, []
    src = src.rstrip()
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise CelError("unexpected character at %d: %r" % (pos, src[pos:pos + 10]))
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    out.append(("eof", None))
    return out


class Parser:
    def __init__(self, src):
        self.t = tokenize(src)
        self.i = 0

    def peek(self, v=None):
        k, val = self.t[self.i]
        return val == v if v is not None else (k, val)

    def take(self, v=None):
        k, val = self.t[self.i]
        if v is not None and val != v:
            raise CelError("expected %r, found %r (token %d)" % (v, val, self.i))
        self.i += 1
        return k, val

    def parse(self):
        e = self.expr()
        if self.t[self.i][0] != "eof":
            raise CelError("trailing input at token %d: %r" % (self.i, self.t[self.i][1]))
        return e

    def expr(self):
        c = self.binary(0)
        if self.peek("?"):
            self.take("?")
            a = self.expr()
            self.take(":")
            b = self.expr()
            return ("?:", c, a, b)
        return c

    LEVELS = [["||"], ["&&"], ["==", "!=", "<", ">", "<=", ">=", "in"], ["+", "-"],
              ["*", "/", "%"]]

    def binary(self, level):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.t[self.i][1] in self.LEVELS[level] and self.t[self.i][0] in ("op", "id"):
            op = self.take()[1]
            left = (op, left, self.binary(level + 1))
        return left

    def unary(self):
        if self.peek("!") or self.peek("-"):
            op = self.take()[1]
            return ("u" + op, self.unary())
        return self.postfix(self.primary())

    def args(self):
        self.take("(")
        out = []
        while not self.peek(")"):
            out.append(self.expr())
            if not self.peek(")"):
                self.take(",")
        self.take(")")
        return out

    def postfix(self, e):
        while True:
            if self.peek("."):
                self.take(".")
                k, name = self.take()
                if k != "id":
                    raise CelError("expected a field name after '.', found %r" % name)
                e = ("call", e, name, self.args()) if self.peek("(") else (".", e, name)
            elif self.peek("["):
                self.take("[")
                idx = self.expr()
                self.take("]")
                e = ("[]", e, idx)
            else:
                return e

    def primary(self):
        k, v = self.take()
        if k == "num":
            return ("lit", int(v))
        if k == "str":
            return ("lit", v[1:-1].encode().decode("unicode_escape"))
        if k == "id":
            if v in ("true", "false"):
                return ("lit", v == "true")
            if v == "null":
                return ("lit", None)
            if self.peek("("):
                return ("call", None, v, self.args())
            return ("id", v)
        if v == "(":
            e = self.expr()
            self.take(")")
            return e
        if v == "[":
            items = []
            while not self.peek("]"):
                items.append(self.expr())
                if not self.peek("]"):
                    self.take(",")
            self.take("]")
            return ("list", items)
        raise CelError("unexpected %r" % v)


def parse(src):
    return Parser(src).parse()


class Quantity:
    SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
              "m": 0.001}

    def __init__(self, s):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G|m)?", s)
        if not m:
            raise CelError("quantity(%r): not a quantity" % s)
        self.v = float(m.group(1)) * self.SUFFIX[m.group(2) or ""]


class Absent(Exception):
    """A field that is not there (has() answers false; anything else is an error)."""


def evaluate(node, env):
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "id":
        if node[1] not in env:
            raise CelError("undeclared reference to '%s'" % node[1])
        return env[node[1]]
    if kind == "list":
        return [evaluate(x, env) for x in node[1]]
    if kind == ".":
        obj = evaluate(node[1], env)
        if not isinstance(obj, dict) or node[2] not in obj:
            raise Absent(node[2])
        return obj[node[2]]
    if kind == "[]":
        obj, idx = evaluate(node[1], env), evaluate(node[2], env)
        try:
            return obj[idx]
        except (KeyError, IndexError, TypeError):
            raise CelError("no such key: %r" % idx)
    if kind == "?:":
        return evaluate(node[2] if evaluate(node[1], env) else node[3], env)
    if kind == "u!":
        return not evaluate(node[1], env)
    if kind == "u-":
        return -evaluate(node[1], env)
    if kind == "&&":
        return bool(evaluate(node[1], env)) and bool(evaluate(node[2], env))
    if kind == "||":
        return bool(evaluate(node[1], env)) or bool(evaluate(node[2], env))
    if kind == "call":
        return call(node, env)
    a, b = evaluate(node[1], env), evaluate(node[2], env)
    ops = {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b, ">": lambda: a > b,
           "<=": lambda: a <= b, ">=": lambda: a >= b, "in": lambda: a in b,
           "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "%": lambda: a % b,
           "/": lambda: a // b}
    if kind == "+" and type(a) is not type(b):
        raise CelError("no matching overload for _+_ on %s and %s" % (type(a), type(b)))
    return ops[kind]()


def call(node, env):
    _, recv, name, args = node
    if recv is None:
        if name == "has":
            if len(args) != 1 or args[0][0] != ".":
                raise CelError("has() takes one field selection")
            try:
                evaluate(args[0], env)
                return True
            except Absent:
                return False
        vals = [evaluate(a, env) for a in args]
        if name == "size":
            return len(vals[0])
        if name == "string":
            return vals[0] if isinstance(vals[0], str) else str(vals[0])
        if name == "int":
            return int(vals[0])
        if name == "quantity":
            return Quantity(vals[0])
        raise CelError("undeclared function '%s'" % name)
    target = evaluate(recv, env)
    if name in MACROS:
        if len(args) != 2 or args[0][0] != "id":
            raise CelError("%s() needs a variable name and an expression" % name)
        var = args[0][1]
        results = [(x, evaluate(args[1], dict(env, **{var: x}))) for x in target]
        if name == "all":
            return all(r for _, r in results)
        if name == "exists":
            return any(r for _, r in results)
        if name == "exists_one":
            return sum(1 for _, r in results if r) == 1
        if name == "filter":
            return [x for x, r in results if r]
        return [r for _, r in results]
    vals = [evaluate(a, env) for a in args]
    if name == "split" and isinstance(target, str):
        return target.split(vals[0])
    if name in ("endsWith", "startsWith", "contains") and isinstance(target, str):
        return {"endsWith": target.endswith, "startsWith": target.startswith,
                "contains": target.__contains__}[name](vals[0])
    if name == "join" and isinstance(target, list):
        return (vals[0] if vals else "").join(target)
    if name in ("isGreaterThan", "isLessThan", "compareTo") and isinstance(target, Quantity):
        o = vals[0].v
        return {"isGreaterThan": target.v > o, "isLessThan": target.v < o,
                "compareTo": (target.v > o) - (target.v < o)}[name]
    raise CelError("no matching overload for %s() on %s" % (name, type(target).__name__))


def run_policy(policy, obj, params):
    """Evaluates a ValidatingAdmissionPolicy's variables and validations for one object.
    Returns None (admitted) or the message of the first failed validation."""
    env = {"object": obj, "params": params, "variables": {}}
    for v in policy["spec"].get("variables", []):
        env["variables"][v["name"]] = evaluate(parse(v["expression"]), env)
    for val in policy["spec"]["validations"]:
        if not evaluate(parse(val["expression"]), env):
            if "messageExpression" in val:
                return evaluate(parse(val["messageExpression"]), env)
            return val.get("message", "denied")
    return None
