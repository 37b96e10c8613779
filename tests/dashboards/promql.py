"""A small PromQL reader for the dashboard tests.

Not a full parser: Prometheus itself judges validity when the test evaluates each query. This
reader finds what Prometheus would accept but a dashboard author gets wrong: metric names the
exporter does not export, label names a metric does not carry (in matchers and in by/without/
on/ignoring/group_* clauses), rate() over a gauge, histogram_quantile() over a non-bucket or
an aggregation that drops le. It also derives an alert's "signal", the expression with its
comparisons against constants removed, so that a quiet alert can still be shown to read live
series.
"""

import re
from dataclasses import dataclass, field

import contract

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<dur>\d+(?:ms|s|m|h|d|w|y)(?:\d+(?:ms|s|m|h|d|w|y))*(?![A-Za-z0-9_:]))
  | (?P<num>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>@])
  | (?P<punct>[(){}\[\],])
""", re.X)

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp",
    "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time",
    "last_over_time", "present_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "pi",
}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
WORD_OPS = {"and", "or", "unless", "bool", "atan2", "offset"}
COMPARISONS = {"==", "!=", ">", "<", ">=", "<="}
COUNTER_FUNCS = {"rate", "irate", "increase", "resets"}
LABEL_MAKERS = {"label_replace", "label_join", "count_values"}


class PromQLSyntaxError(Exception):
    pass


@dataclass
class Token:
    kind: str
    text: str


@dataclass
class Selector:
    metric: str | None
    matchers: list  # (label, op, value)
    funcs: tuple  # enclosing calls, outermost first
    has_range: bool = False

    def names(self):
        """Metric names this selector can match (from the name or an __name__ matcher)."""
        if self.metric:
            return [self.metric]
        for label, op, value in self.matchers:
            if label == "__name__":
                if op == "=":
                    return [value]
                if op == "=~" and re.fullmatch(r"[A-Za-z0-9_:|]+", value):
                    return value.split("|")
        return []


@dataclass
class Grouping:
    keyword: str
    labels: list
    funcs: tuple


@dataclass
class Analysis:
    selectors: list = field(default_factory=list)
    groupings: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    made_labels: set = field(default_factory=set)

    def metric_names(self):
        out = []
        for s in self.selectors:
            for n in s.names():
                if n not in out:
                    out.append(n)
        return out


def tokenize(expr):
    out = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise PromQLSyntaxError(f"unexpected character {expr[pos]!r} at {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind in ("ws", "comment"):
            continue
        out.append(Token(kind, m.group()))
    return out


def unquote(s):
    if s[0] == "`":
        return s[1:-1]
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def analyze(expr):
    toks = tokenize(expr)
    a = Analysis()
    stack = []  # one entry per open '(' : call name or None
    pending_agg = None
    i = 0
    n = len(toks)

    def funcs():
        return tuple(f for f in stack if f)

    def parse_matchers(j):
        """toks[j] is '{'; returns (matchers, index after '}')."""
        ms = []
        j += 1
        while j < n and toks[j].text != "}":
            if toks[j].text == ",":
                j += 1
                continue
            if j + 2 >= n or toks[j].kind != "ident" or toks[j + 1].text not in ("=", "!=", "=~", "!~") \
                    or toks[j + 2].kind != "str":
                raise PromQLSyntaxError(f"bad label matcher near {' '.join(t.text for t in toks[j:j + 3])!r}")
            ms.append((toks[j].text, toks[j + 1].text, unquote(toks[j + 2].text)))
            j += 3
        if j >= n:
            raise PromQLSyntaxError("unclosed '{'")
        return ms, j + 1

    def add_selector(name, ms, j):
        """Records a selector whose matchers end before toks[j]; returns j."""
        sel = Selector(name, ms, funcs())
        sel.has_range = j < n and toks[j].text == "["
        a.selectors.append(sel)
        return j

    while i < n:
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < n else None
        if t.kind == "ident":
            low = t.text.lower()
            if t.text in GROUPING:
                if nxt is not None and nxt.text == "(":
                    j = i + 2
                    labels = []
                    while j < n and toks[j].text != ")":
                        if toks[j].kind == "ident":
                            labels.append(toks[j].text)
                        elif toks[j].text != ",":
                            raise PromQLSyntaxError(f"bad label list after {t.text}")
                        j += 1
                    a.groupings.append(Grouping(t.text, labels, funcs() + ((pending_agg,) if pending_agg else ())))
                    i = j + 1
                    continue
                i += 1
                continue
            if t.text in WORD_OPS:
                i += 1
                continue
            if nxt is not None and nxt.text == "(":
                if t.text not in FUNCTIONS and t.text not in AGGREGATIONS:
                    raise PromQLSyntaxError(f"unknown function {t.text}()")
                a.calls.append(t.text)
                stack.append(t.text)
                pending_agg = None
                i += 2
                continue
            if t.text in AGGREGATIONS and nxt is not None and nxt.text in GROUPING:
                pending_agg = t.text
                a.calls.append(t.text)
                i += 1
                continue
            if low in ("inf", "nan"):
                i += 1
                continue
            # a metric name, maybe with matchers and a range
            ms = []
            j = i + 1
            if j < n and toks[j].text == "{":
                ms, j = parse_matchers(j)
            i = add_selector(t.text, ms, j)
            continue
        if t.text == "{":
            i = add_selector(None, *parse_matchers(i))
            continue
        if t.text == "(":
            stack.append(pending_agg)
            pending_agg = None
            i += 1
            continue
        if t.text == ")":
            if not stack:
                raise PromQLSyntaxError("unbalanced ')'")
            stack.pop()
            i += 1
            continue
        if t.kind == "str" and stack and stack[-1] in LABEL_MAKERS:
            a.made_labels.add(unquote(t.text))
        i += 1
    if stack:
        raise PromQLSyntaxError("unbalanced '('")
    return a


def signal(expr):
    """The expression without its comparisons against constants: `a > 0.9 and b == 0` becomes
    `a and b`. What an alert measures, whether or not it fires right now."""
    toks = tokenize(expr)
    out = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "op" and t.text in COMPARISONS:
            j = i + 1
            if j < len(toks) and toks[j].text == "bool":
                j += 1
            if j < len(toks) and toks[j].kind == "num":
                i = j + 1
                continue
        out.append(t.text)
        i += 1
    text = ""
    depth = 0  # inside {...}
    prev = ""
    for tok in out:
        tight = (not text or tok in ")]},[{" or prev in "([{" or depth > 0 and prev != ","
                 or tok == "(" and (prev[-1:].isalnum() or prev[-1:] == "_"))
        if not tight:
            text += " "
        text += tok
        depth += tok == "{"
        depth -= tok == "}"
        prev = tok
    return text


# -- catalogue of what may be referenced --------------------------------------------------------

@dataclass
class Entry:
    name: str       # sample name as used in PromQL
    family: str
    type: str       # counter, gauge, histogram, summary, untyped, rule
    labels: set
    source: str     # live, contract, deep, rule, prometheus
    bucket: bool = False


def catalog_add_family(cat, family, typ, labels, source):
    labels = set(labels) | contract.TARGET_LABELS
    if typ in ("histogram", "summary"):
        if typ == "histogram":
            cat[family + "_bucket"] = Entry(family + "_bucket", family, typ, labels | {"le"}, source, True)
        else:
            cat[family] = Entry(family, family, typ, labels | {"quantile"}, source)
        cat[family + "_sum"] = Entry(family + "_sum", family, typ, labels, source)
        cat[family + "_count"] = Entry(family + "_count", family, typ, labels, source)
    else:
        cat[family] = Entry(family, family, typ, labels, source)


def catalog_add_external(cat):
    for name, (typ, labels) in contract.PROMETHEUS_SERIES.items():
        catalog_add_family(cat, name, typ, labels, "prometheus")
    for name, (typ, labels) in contract.KUBE_STATE_METRICS_SERIES.items():
        catalog_add_family(cat, name, typ, labels, "kube-state-metrics")


def static_catalog():
    cat = {}
    catalog_add_external(cat)
    for name, (typ, labels) in contract.BASE.items():
        catalog_add_family(cat, name, typ, labels, "contract")
    for name, (typ, labels, _probes) in contract.DEEP.items():
        catalog_add_family(cat, name, typ, labels, "deep")
    return cat


def live_catalog(families):
    """From harness.parse_exposition(); DEEP metrics the daemon does not expose come from the
    contract."""
    cat = {}
    catalog_add_external(cat)
    for name, (typ, labels, _probes) in contract.DEEP.items():
        catalog_add_family(cat, name, typ, labels, "deep")
    for name, (typ, labels) in contract.BASE.items():
        if name not in families:
            catalog_add_family(cat, name, typ, labels, "absent")
    for fam, info in families.items():
        catalog_add_family(cat, fam, info["type"], info["labels"], "live")
    return cat


def rule_labels(expr, cat):
    """The labels a recording rule's series can carry, read from its expression: the by()
    list of an outer aggregation, else the inputs' labels (le dropped by histogram_quantile)."""
    a = analyze(expr)
    outer = [g for g in a.groupings if g.keyword == "by"
             and not any(f in AGGREGATIONS for f in g.funcs[:-1])]
    if outer:
        labels = set()
        for g in outer:
            labels |= set(g.labels)
    else:
        labels = set()
        for s in a.selectors:
            for n in s.names():
                if n in cat:
                    labels |= cat[n].labels
        labels |= contract.TARGET_LABELS
    if "histogram_quantile" in a.calls:
        labels.discard("le")
    return labels


def catalog_add_rules(cat, rules):
    """rules: list of (record_name, expr). Each rule's labels come from its expression."""
    for name, expr in rules:
        cat[name] = Entry(name, name, "rule", rule_labels(expr, cat), "rule")


def lint(expr, cat):
    """Errors (strings) about metric names, labels and function use; [] if none."""
    errs = []
    if "$" in expr:
        errs.append("unsubstituted template variable: " + ", ".join(sorted(set(re.findall(r"\$\{?\w+", expr)))))
        return errs
    try:
        a = analyze(expr)
    except PromQLSyntaxError as e:
        return [f"syntax: {e}"]
    known_labels = set(a.made_labels)
    for s in a.selectors:
        names = s.names()
        if not names:
            errs.append("selector without a metric name: " + str(s.matchers))
            continue
        for name in names:
            e = cat.get(name)
            if e is None:
                errs.append(f"metric {name} is not exported (not in the live exposition, the contract, "
                            "kube-state-metrics' series or the recording rules)")
                continue
            if e.source == "absent":
                errs.append(f"{name} is in the metric contract but absent from this scrape "
                            "(the exporter omits families without series)")
            known_labels |= e.labels
            for label, _op, _v in s.matchers:
                if label != "__name__" and label not in e.labels:
                    errs.append(f"{name} has no label {label!r} (it has {', '.join(sorted(e.labels))})")
            inner = s.funcs[-1] if s.funcs else None
            if inner in COUNTER_FUNCS and e.type not in ("counter", "histogram", "summary", "rule", "untyped"):
                errs.append(f"{inner}() over {name}, a {e.type}")
            if inner in COUNTER_FUNCS and e.type in ("histogram", "summary") and name == e.family:
                errs.append(f"{inner}() over the summary {name} itself")
            if "histogram_quantile" in s.funcs and e.type != "rule" and not e.bucket:
                errs.append(f"histogram_quantile() over {name}, which is not a histogram's _bucket")
    for g in a.groupings:
        for label in g.labels:
            if label not in known_labels:
                errs.append(f"{g.keyword}({label}) names a label none of the query's metrics has")
        if "histogram_quantile" in g.funcs and any(f in AGGREGATIONS for f in g.funcs):
            if g.keyword == "by" and "le" not in g.labels:
                errs.append("an aggregation inside histogram_quantile() drops le")
            if g.keyword == "without" and "le" in g.labels:
                errs.append("an aggregation inside histogram_quantile() removes le")
    return errs
