"""Static checks: dashboard JSON, provisioning YAML, rule files (promtool check/test rules and
what promtool does not check), every query read against the metric contract, the
kube-state-metrics series the live run serves.

Needs python3-yaml (Debian package) for the YAML files.
"""

import fnmatch
import glob
import json
import os
import re
import subprocess

import contract
import harness
import promql

try:
    import yaml
except ImportError:  # reported as a failure by check_yaml_available()
    yaml = None

UNITS = {"percentunit", "percent", "s", "ms", "µs", "ns", "ops", "cps", "iops", "reqps", "none",
         "short", "bytes", "Bps"}
PANEL_TYPES = {"timeseries", "stat", "bargauge", "table", "heatmap", "row", "text"}
BUILTIN_VARS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
                "__range_ms", "__from", "__to", "__dashboard", "__org", "__user", "__name"}
REQUIRED_VARS = {
    "iouscope-overview": {"instance", "pod", "container", "comm", "pid", "sq_thread"},
    "iouscope-sqthread": {"instance", "pod", "container", "comm", "pid", "sq_thread", "ring"},
    "iouscope-iopoll": {"instance", "pod", "container", "comm", "pid", "ring", "device"},
    "iouscope-requests": {"instance", "pod", "container", "comm", "pid", "ring"},
}
ALL_REQUIRED_VARS = {"instance", "pod", "container", "sq_thread", "pid", "comm", "ring", "device"}
DS_UID = "${datasource}"
VAR_REF = re.compile(r"\$(\w+)|\$\{(\w+)(?::[\w]+)?\}|\[\[(\w+)\]\]")
SEVERITIES = {"info", "warning", "critical"}


def var_refs(text):
    return {a or b or c for a, b, c in VAR_REF.findall(text)}


def one_sentence(text):
    text = (text or "").strip()
    if not text or not text.endswith("."):
        return False
    return not re.search(r"[.!?]\s+[A-Z(]", text[:-1])


def flatten_panels(panels):
    for p in panels:
        yield p
        for q in p.get("panels", []) or []:
            yield q


def label_values_query(q):
    """label_values(selector, label) or label_values(label) -> (selector or None, label)."""
    m = re.fullmatch(r"\s*label_values\(\s*(.*?)\s*,\s*(\w+)\s*\)\s*", q, re.S)
    if m:
        return m.group(1), m.group(2)
    m = re.fullmatch(r"\s*label_values\(\s*(\w+)\s*\)\s*", q)
    if m:
        return None, m.group(1)
    return None


def var_query(v):
    q = v.get("query")
    if isinstance(q, dict):
        q = q.get("query", "")
    return q or ""


def example_substitution(text, variables):
    """Replaces template variables by harmless example values so a query can be read."""
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name == "__rate_interval" or name == "__interval" or name == "__range":
            return "5m"
        return "example"
    return VAR_REF.sub(repl, text)


# -- dashboards ----------------------------------------------------------------------------------

def load_dashboards():
    out = []
    for path in sorted(glob.glob(os.path.join(harness.GRAFANA_DIR, "*.json"))):
        try:
            with open(path) as f:
                out.append((path, json.load(f)))
        except ValueError:
            pass  # check_dashboards reports it
    return out


def check_dashboards(res, cat):
    """Returns the dashboards as dicts for the live test."""
    res.section("dashboard structure")
    files = sorted(glob.glob(os.path.join(harness.GRAFANA_DIR, "*.json")))
    res.check(len(files) >= 3, "three dashboards or more", f"{len(files)} files",
              f"only {len(files)} JSON files in dashboards/grafana")
    models = []
    uids = {}
    var_union = set()
    all_uids = {d.get("uid") for _p, d in load_dashboards()}
    for path in files:
        rel = os.path.relpath(path, harness.REPO)
        try:
            with open(path) as f:
                d = json.load(f)
        except ValueError as e:
            res.fail(rel, f"not JSON: {e}")
            continue
        errs = []
        uid = d.get("uid") or ""
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid):
            errs.append(f"uid {uid!r} is not 1-40 of [A-Za-z0-9_-]")
        if uid in uids:
            errs.append(f"uid {uid} also used by {uids[uid]}")
        uids[uid] = rel
        if not d.get("title"):
            errs.append("no title")
        if not (36 <= int(d.get("schemaVersion", 0)) <= 41):
            errs.append(f"schemaVersion {d.get('schemaVersion')} is not 36..41")
        if d.get("id") is not None:
            errs.append("id must be null for import")
        if "iouscope" not in (d.get("tags") or []):
            errs.append("no iouscope tag (the dashboard links use it)")
        if not d.get("description"):
            errs.append("no dashboard description")
        res.check(not errs, f"{rel}: dashboard fields", f"uid {uid}, schemaVersion {d.get('schemaVersion')}",
                  "; ".join(errs))

        # variables
        variables = d.get("templating", {}).get("list", [])
        errs = []
        names = []
        ds_vars = [v for v in variables if v.get("type") == "datasource"]
        if not ds_vars or ds_vars[0].get("name") != "datasource" or ds_vars[0].get("query") != "prometheus":
            errs.append('no datasource variable "datasource" of type prometheus')
        for v in variables:
            name = v.get("name", "")
            if name in names:
                errs.append(f"variable {name} defined twice")
            if not v.get("description"):
                errs.append(f"variable {name} has no description")
            if v.get("type") == "query":
                if (v.get("datasource") or {}).get("uid") != DS_UID:
                    errs.append(f"variable {name}: datasource is not {DS_UID}")
                q = var_query(v)
                lv = label_values_query(q)
                if not lv:
                    errs.append(f"variable {name}: query {q!r} is not label_values(...)")
                else:
                    undefined = var_refs(q) - set(names) - BUILTIN_VARS
                    if undefined:
                        errs.append(f"variable {name} uses {sorted(undefined)} before they are defined")
                    if lv[0]:
                        for e in promql.lint(example_substitution(lv[0], variables), cat):
                            errs.append(f"variable {name}: {e}")
                        if not promql.analyze(example_substitution(lv[0], variables)).selectors:
                            errs.append(f"variable {name}: no selector")
                        else:
                            sel_names = promql.analyze(example_substitution(lv[0], variables)).metric_names()
                            for sn in sel_names:
                                e = cat.get(sn)
                                if e and lv[1] not in e.labels:
                                    errs.append(f"variable {name}: {sn} has no label {lv[1]}")
                if v.get("multi") and v.get("includeAll") and "allValue" not in v:
                    errs.append(f"variable {name}: multi with All but no allValue")
                if v.get("refresh") not in (1, 2):
                    errs.append(f"variable {name}: refresh must be 1 or 2")
            elif v.get("type") != "datasource":
                errs.append(f"variable {name}: type {v.get('type')} not expected")
            names.append(name)
        required = REQUIRED_VARS.get(uid, {"instance"})
        missing = required - set(names)
        if missing:
            errs.append(f"missing variables {sorted(missing)}")
        var_union |= set(names)
        res.check(not errs, f"{rel}: template variables", ", ".join(names), "; ".join(errs))

        # panels
        panels = list(flatten_panels(d.get("panels", [])))
        errs = []
        ids = [p.get("id") for p in panels]
        dup = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        if dup:
            errs.append(f"duplicate panel ids {dup}")
        if any(not isinstance(i, int) for i in ids):
            errs.append("a panel id is not an integer")
        rects = []
        for p in panels:
            g = p.get("gridPos") or {}
            x, y, w, h = g.get("x"), g.get("y"), g.get("w"), g.get("h")
            if None in (x, y, w, h) or w < 1 or h < 1 or x < 0 or x + w > 24:
                errs.append(f"panel {p.get('id')} gridPos {g} out of the 24-column grid")
                continue
            for (ox, oy, ow, oh, oid) in rects:
                if x < ox + ow and ox < x + w and y < oy + oh and oy < y + h:
                    errs.append(f"panels {oid} and {p.get('id')} overlap")
            rects.append((x, y, w, h, p.get("id")))
        res.check(not errs, f"{rel}: panel ids and layout", f"{len(panels)} panels, ids unique",
                  "; ".join(errs))

        types_used = set()
        targets = []
        for p in panels:
            pid = p.get("id")
            ptype = p.get("type")
            title = p.get("title", "")
            name = f"{rel}: panel {pid} {title!r}"
            if ptype == "row":
                continue
            types_used.add(ptype)
            errs = []
            if ptype not in PANEL_TYPES:
                errs.append(f"panel type {ptype} not expected")
            if not title:
                errs.append("no title")
            if not one_sentence(p.get("description")):
                errs.append(f"description is not one sentence: {p.get('description')!r}")
            if (p.get("datasource") or {}).get("uid") != DS_UID:
                errs.append(f"datasource is {p.get('datasource')}, not {DS_UID}")
            defaults = (p.get("fieldConfig") or {}).get("defaults") or {}
            unit = defaults.get("unit")
            if unit not in UNITS:
                errs.append(f"unit {unit!r} not set or not one of {sorted(UNITS)}")
            for o in (p.get("fieldConfig") or {}).get("overrides", []):
                for prop in o.get("properties", []):
                    if prop.get("id") == "unit" and prop.get("value") not in UNITS:
                        errs.append(f"override unit {prop.get('value')!r} unknown")
            if ptype == "heatmap":
                opts = p.get("options") or {}
                if (opts.get("yAxis") or {}).get("unit") not in UNITS:
                    errs.append("heatmap y axis has no unit")
                if opts.get("calculate") is not False:
                    errs.append("heatmap must use the histogram's buckets (calculate: false)")
                if any(t.get("format") != "heatmap" for t in p.get("targets", [])):
                    errs.append("heatmap targets need format heatmap")
            if ptype == "table" and any(not t.get("instant") or t.get("format") != "table"
                                        for t in p.get("targets", [])):
                errs.append("table targets must be instant with format table")
            tlist = p.get("targets") or []
            if not tlist:
                errs.append("no targets")
            refs = [t.get("refId") for t in tlist]
            if len(set(refs)) != len(refs) or None in refs:
                errs.append(f"refIds not unique: {refs}")
            for t in tlist:
                expr = t.get("expr") or ""
                if not expr.strip():
                    errs.append(f"target {t.get('refId')}: empty expr")
                    continue
                if t.get("datasource") and t["datasource"].get("uid") != DS_UID:
                    errs.append(f"target {t.get('refId')}: datasource not {DS_UID}")
                undefined = var_refs(expr) - set(names) - BUILTIN_VARS
                if undefined:
                    errs.append(f"target {t.get('refId')}: undefined variables {sorted(undefined)}")
                for e in promql.lint(example_substitution(expr, variables), cat):
                    errs.append(f"target {t.get('refId')}: {e}")
                targets.append({"panel": pid, "title": title, "type": ptype,
                                "refId": t.get("refId"), "expr": expr,
                                "instant": bool(t.get("instant"))})
            for link in (defaults.get("links") or []) + [
                    pr.get("value") for o in (p.get("fieldConfig") or {}).get("overrides", [])
                    for pr in o.get("properties", []) if pr.get("id") == "links"]:
                for l in (link if isinstance(link, list) else [link]):
                    m = re.search(r"/d/([^/?]+)", l.get("url", ""))
                    if m:
                        targets_uid = m.group(1)
                        if targets_uid not in all_uids:
                            errs.append(f"link to unknown dashboard uid {targets_uid}")
            res.check(not errs, name, f"{ptype}, unit {unit}, {len(tlist)} queries", "; ".join(errs))

        required_types = {r.get("id") for r in d.get("__requires", []) if r.get("type") == "panel"}
        missing_types = types_used - required_types
        res.check(not missing_types, f"{rel}: __requires lists every panel type",
                  ", ".join(sorted(types_used)), f"missing {sorted(missing_types)}")
        models.append({"file": rel, "uid": uid, "title": d.get("title"), "variables": variables,
                       "targets": targets})
    res.check(ALL_REQUIRED_VARS <= var_union, "template variables " + ", ".join(sorted(ALL_REQUIRED_VARS)),
              "all present", f"missing {sorted(ALL_REQUIRED_VARS - var_union)}")
    return models


# -- provisioning --------------------------------------------------------------------------------

def check_yaml_available(res):
    return res.check(yaml is not None, "python3-yaml is installed", "",
                     "import yaml failed: apt-get install python3-yaml")


def provisioning_docs(res, paths):
    """Each Grafana provisioning file that parses, in turn: its path in the repository, its
    document and what is wrong with its apiVersion. One that does not is reported and passed."""
    for path in paths:
        rel = os.path.relpath(path, harness.REPO)
        try:
            doc = yaml.safe_load(open(path))
        except yaml.YAMLError as e:
            res.fail(rel, f"YAML: {e}")
            continue
        errs = [] if doc.get("apiVersion") == 1 else ["apiVersion is not 1"]
        yield rel, doc, errs


def check_provisioning(res):
    res.section("grafana provisioning")
    if not check_yaml_available(res):
        return
    prov = os.path.join(harness.GRAFANA_DIR, "provisioning")
    dash_files = sorted(glob.glob(os.path.join(prov, "dashboards", "*.yml")))
    ds_files = sorted(glob.glob(os.path.join(prov, "datasources", "*.yml")))
    res.check(bool(dash_files), "a dashboard provider file", "", "no provisioning/dashboards/*.yml")
    for rel, doc, errs in provisioning_docs(res, dash_files):
        providers = doc.get("providers") or []
        if not providers:
            errs.append("no providers")
        for p in providers:
            if not p.get("name"):
                errs.append("provider without name")
            if p.get("type") != "file":
                errs.append(f"provider {p.get('name')}: type is not file")
            path_opt = (p.get("options") or {}).get("path", "")
            if not path_opt.startswith("/"):
                errs.append(f"provider {p.get('name')}: options.path {path_opt!r} is not absolute")
        res.check(not errs, rel, f"{len(providers)} provider(s)", "; ".join(errs))
    for rel, doc, errs in provisioning_docs(res, ds_files):
        for ds in doc.get("datasources") or []:
            if ds.get("type") != "prometheus":
                errs.append(f"{ds.get('name')}: type is not prometheus")
            if not re.match(r"https?://", ds.get("url", "")):
                errs.append(f"{ds.get('name')}: url is not http(s)")
            if not ds.get("uid") or not ds.get("name"):
                errs.append("a data source needs a name and a uid")
            if not (ds.get("jsonData") or {}).get("timeInterval"):
                errs.append(f"{ds.get('name')}: jsonData.timeInterval (scrape interval) not set")
        res.check(not errs, rel, f"{len(doc.get('datasources') or [])} data source(s)", "; ".join(errs))


# -- rules ---------------------------------------------------------------------------------------

def promtool(args, stdin=None):
    p = subprocess.run([harness.PROMTOOL] + args, input=stdin, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def load_rules():
    """[(file, group, kind, name, expr, rule dict)] from the rule files."""
    out = []
    for path in harness.rule_files():
        doc = yaml.safe_load(open(path))
        for g in doc.get("groups", []):
            for r in g.get("rules", []):
                kind = "alert" if "alert" in r else "record"
                out.append((os.path.relpath(path, harness.REPO), g["name"], kind,
                            r.get("alert") or r.get("record"), r["expr"], r))
    return out


def check_rules(res, cat):
    """Returns the rules and adds the recording rules to cat."""
    res.section("prometheus rules")
    files = harness.rule_files()
    res.check(bool(files), "rule files", ", ".join(os.path.basename(f) for f in files),
              "no dashboards/prometheus/*.rules.yml")
    rc, out = promtool(["check", "rules"] + files)
    res.check(rc == 0, "promtool check rules", out.splitlines()[-1].strip() if out else "", out)
    tests = sorted(glob.glob(os.path.join(harness.RULES_DIR, "tests", "*.yml")))
    rc, out = promtool(["test", "rules"] + tests)
    res.check(rc == 0 and bool(tests), "promtool test rules",
              f"{len(tests)} test files: " + ", ".join(os.path.basename(t) for t in tests), out)
    if yaml is None:
        check_yaml_available(res)
        return []
    rules = load_rules()
    promql.catalog_add_rules(cat, [(name, expr) for _f, _g, kind, name, expr, _r in rules
                                   if kind == "record"])

    fires, quiet, exprs = set(), set(), []
    for t in tests:
        doc = yaml.safe_load(open(t))
        for case in doc.get("tests", []):
            for a in case.get("alert_rule_test", []) or []:
                (fires if a.get("exp_alerts") else quiet).add(a.get("alertname"))
            for e in case.get("promql_expr_test", []) or []:
                exprs.append(e.get("expr", ""))
    for f, g, kind, name, expr, r in rules:
        errs = []
        if kind == "alert":
            sev = (r.get("labels") or {}).get("severity")
            if sev not in SEVERITIES:
                errs.append(f"severity {sev!r} not in {sorted(SEVERITIES)}")
            ann = r.get("annotations") or {}
            if not ann.get("summary"):
                errs.append("no summary")
            if len(ann.get("description", "")) < 120:
                errs.append("description missing or too short to say what to do")
            if name not in fires:
                errs.append("no unit test where it fires")
            if name not in quiet:
                errs.append("no unit test where it stays quiet")
        else:
            if not re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", name):
                errs.append("name is not level:metric:operations")
            if not any(re.search(r"(?<![\w:])" + re.escape(name) + r"(?![\w:])", e) for e in exprs):
                errs.append("no promql_expr_test reads it")
        for e in promql.lint(expr, cat):
            errs.append(e)
        detail = "fires and stays quiet in unit tests" if kind == "alert" else "unit-tested"
        res.check(not errs, f"{kind} {name}", detail, "; ".join(errs))
    return rules


def check_kube_state_metrics(res, path):
    """The kube-state-metrics series the live run serves must pass promtool check metrics and
    carry exactly the labels the contract gives their families, or the lint would accept
    queries the fixture cannot answer (or the other way round)."""
    res.section("kube-state-metrics series")
    rel = os.path.relpath(path, harness.REPO)
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        res.fail(rel, str(e))
        return
    rc, out = promtool(["check", "metrics"], stdin=text)
    res.check(rc == 0, f"promtool check metrics {rel}", f"{len(text.splitlines())} lines", out)
    fams = harness.parse_exposition(text)
    for name, (typ, labels) in contract.KUBE_STATE_METRICS_SERIES.items():
        f = fams.get(name)
        if not f:
            res.fail(f"{rel}: {name}", "no series")
            continue
        errs = []
        if f["type"] != typ:
            errs.append(f"type {f['type']}, the contract says {typ}")
        if f["labels"] != labels:
            errs.append(f"labels differ from the contract: only in the file {sorted(f['labels'] - labels)}, "
                        f"only in the contract {sorted(labels - f['labels'])}")
        res.check(not errs, f"{rel}: {name} as in contract.KUBE_STATE_METRICS_SERIES",
                  f"{f['series']} series, {typ}", "; ".join(errs))
    extra = sorted(set(fams) - set(contract.KUBE_STATE_METRICS_SERIES))
    res.check(not extra, f"{rel}: only families the contract knows", "", f"unknown: {', '.join(extra)}")


def documented_names(text):
    """Metric names the docs mention, with brace lists after an underscore expanded
    (iouscope_sqthread_{cpu,work}_seconds_total) and label braces dropped
    (iouscope_rings{mode}); a trailing * stays a wildcard."""
    def expand(tok):
        m = re.search(r"_\{([a-z_,]+)\}", tok)
        if not m:
            return [re.sub(r"\{.*", "", tok).rstrip("_")]
        out = []
        for alt in m.group(1).split(","):
            out += expand(tok[:m.start() + 1] + alt + tok[m.end():])
        return out
    names = set()
    for tok in re.findall(r"iouscope_[a-z_{},*]+", text):
        names.update(expand(tok.rstrip(",")))
    return names


def check_catalogue(res, repo):
    """The daemon's declared families against the docs and the hand-kept DEEP table."""
    res.section("metric catalogue (iouscoped --metrics)")
    for problem in contract.check_catalogue():
        res.fail("every deep family is declared", problem)
    if not contract.check_catalogue():
        res.ok("every deep family is declared", f"{len(contract.DEEP)} deep families")
    docs = [os.path.join(repo, "README.md")] + sorted(
        os.path.join(repo, "docs", f) for f in os.listdir(os.path.join(repo, "docs"))
        if f.endswith(".md"))
    # The reading can fail: brace lists expand, label braces drop, an absent name is absent.
    control = documented_names("iouscope_a_{b,c}_total and iouscope_d{mode} iouscope_e_*")
    if control != {"iouscope_a_b_total", "iouscope_a_c_total", "iouscope_d",
                   "iouscope_e_*"}:
        res.fail("documented_names reads the docs' shorthand", sorted(control))
    text = "".join(open(f, encoding="utf-8").read() for f in docs)
    said = documented_names(text)
    missing = sorted(n for n in contract.CATALOGUE
                     if n not in said and not any("*" in p and fnmatch.fnmatch(n, p) for p in said))
    if missing:
        res.fail("every family is documented in README.md or docs/", ", ".join(missing))
    else:
        res.ok("every family is documented in README.md or docs/",
               f"{len(contract.CATALOGUE)} families")
