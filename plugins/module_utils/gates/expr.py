# -*- coding: utf-8 -*-
# Copyright: netscale.multinic contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safe evaluation of gate conditions such as ``established == expected and loss_percent <= 0``.

The expression is parsed with :mod:`ast` and only a small whitelist of node types is evaluated:
literals, names (the measured values and the gate's parameters), comparisons, ``and``/``or``/
``not``, arithmetic, subscripts (``shares['eth0']``) and calls of a few pure functions
(abs, min, max, len, sum, round, all, any). No attribute access, no comprehensions, no imports.
"""

from __future__ import annotations

import ast
import operator

from ansible_collections.netscale.multinic.plugins.module_utils.errors import MultinicError


class ConditionError(MultinicError):
    """A condition cannot be parsed or evaluated."""


_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_FUNCS = {"abs": abs, "min": min, "max": max, "len": len, "sum": sum, "round": round,
          "all": all, "any": any}


def compile_condition(text):
    """Parse ``text`` once; returns the AST (raises ConditionError naming the problem)."""
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("condition %r: must be a non-empty expression, e.g. 'established == expected'"
                             % (text,))
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError("condition %r: syntax error at column %s (%s); use Python comparison syntax, "
                             "e.g. 'loss_percent <= max_loss_percent'" % (text, exc.offset, exc.msg))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp, ast.Starred, ast.NamedExpr)):
            raise ConditionError("condition %r: %s is not allowed; use names, comparisons, arithmetic and "
                                 "%s" % (text, type(node).__name__, ", ".join(sorted(_FUNCS))))
    return tree


def names(text):
    """Names a condition refers to (for early validation against the measured values)."""
    tree = compile_condition(text)
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCS
                   and n.id not in ("True", "False", "None")})


def evaluate(text, env):
    """Evaluate condition ``text`` with the variables of ``env``; returns a bool."""
    tree = compile_condition(text)
    try:
        return bool(_eval(tree.body, env, text))
    except ConditionError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
        raise ConditionError("condition %r: %s: %s" % (text, type(exc).__name__, exc))


def _eval(node, env, text):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise ConditionError("condition %r: unknown name %r; known: %s" % (text, node.id, ", ".join(sorted(env))))
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            val = True
            for v in node.values:
                val = _eval(v, env, text)
                if not val:
                    return val
            return val
        val = False
        for v in node.values:
            val = _eval(v, env, text)
            if val:
                return val
        return val
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env, text)
        if isinstance(node.op, ast.Not):
            return not val
        if isinstance(node.op, ast.USub):
            return -val
        if isinstance(node.op, ast.UAdd):
            return +val
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, env, text), _eval(node.right, env, text))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env, text)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript):
        return _eval(node.value, env, text)[_eval(node.slice, env, text)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env, text) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[_eval(a, env, text) for a in node.args])
    raise ConditionError("condition %r: %s is not allowed" % (text, type(node).__name__))
