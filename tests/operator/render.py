#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# render.py: renders NVIDIA's manifests as NVIDIA's tools would, from the upstream files kept
# in tests/operator/upstream/ (SOURCES.md), for the values the operator lane uses: the GPU
# Operator v26.7.0's operand DaemonSets (its controllers/object_controls.go transforms:
# image, devicePlugin.config, mig.strategy, migManager.config, validator image) and NVIDIA's
# DRA chart v25.12.0 (and v0.4.0, from kubernetes-sigs/dra-driver-nvidia-gpu, which renamed
# it dra-driver-nvidia-gpu) through a small Go-template interpreter covering what its
# kubeletplugin.yaml uses (if/else/with/range, pipelines, include of _helpers.tpl's named
# templates, toYaml, nindent, quote, default, eq/gt/and/or/not, int, hasKey, dir, trimSuffix).
# Standard library + PyYAML; no Helm, no cluster.
import copy
import os
import re

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
OPERATOR = os.path.join(HERE, "upstream/gpu-operator-v26.7.0/assets")
DRA_CHART = os.path.join(HERE, "upstream/nvidia-dra-driver-gpu-v25.12.0/deployments/helm/"
                         "nvidia-dra-driver-gpu")
# version -> (chart folder, the release name its install docs use)
DRA_CHARTS = {
    "25.12.0": (DRA_CHART, "nvidia-dra-driver-gpu"),
    "0.4.0": (os.path.join(HERE, "upstream/dra-driver-nvidia-gpu-v0.4.0/deployments/helm/"
                                 "dra-driver-nvidia-gpu"), "dra-driver-nvidia-gpu"),
}
NAMESPACE = "gpu-operator"

# ---- the GPU Operator ------------------------------------------------------------------------


def _load(path):
    with open(os.path.join(OPERATOR, path)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _named(containers, name):
    for c in containers or []:
        if c["name"] == name:
            return c
    return None


def _set_env(c, name, value):
    """setContainerEnv: replaces the value of an existing variable, else appends it."""
    env = c.setdefault("env", [])
    for e in env:
        if e["name"] == name:
            e.pop("valueFrom", None)
            e["value"] = value
            return
    env.append({"name": name, "value": value})


def _validation_init(spec, policy):
    """transformValidationInitContainer: the *-validation init containers run the validator's
    image, not the operand's."""
    for c in spec.get("initContainers", []):
        if "validation" in c["name"]:
            c["image"] = policy["validator"]["image"]


def _plugin_config(ds, policy):
    """handleDevicePluginConfig: without devicePlugin.config the config-manager containers go;
    with it, CONFIG_FILE=/config/config.yaml, the ConfigMap at /available-configs, an emptyDir
    at /config, DEFAULT_CONFIG and FALLBACK_STRATEGIES=empty for config-manager."""
    spec = ds["spec"]["template"]["spec"]
    cfg = policy["devicePlugin"].get("config")
    if not cfg or not cfg.get("name"):
        spec["initContainers"] = [c for c in spec.get("initContainers", [])
                                  if c["name"] != "config-manager-init"]
        spec["containers"] = [c for c in spec["containers"] if c["name"] != "config-manager"]
        return
    mounts = [{"name": "config", "mountPath": "/config"},
              {"name": cfg["name"], "mountPath": "/available-configs"}]
    for c in spec["containers"]:
        if c["name"] in ("nvidia-device-plugin", "gpu-feature-discovery",
                         "mps-control-daemon-ctr"):
            _set_env(c, "CONFIG_FILE", "/config/config.yaml")
            c.setdefault("volumeMounts", []).extend(copy.deepcopy(mounts))
    if not spec.get("hostPID"):
        spec["shareProcessNamespace"] = True
    spec["volumes"].append({"name": cfg["name"], "configMap": {"name": cfg["name"]}})
    spec["volumes"].append({"name": "config", "emptyDir": {}})
    for c in spec.get("initContainers", []) + spec["containers"]:
        if c["name"] in ("config-manager-init", "config-manager"):
            c["image"] = policy["devicePlugin"]["image"]
            _set_env(c, "DEFAULT_CONFIG", cfg.get("default", ""))
            _set_env(c, "FALLBACK_STRATEGIES", "empty")
            c.setdefault("volumeMounts", []).extend(copy.deepcopy(mounts))


def _mig_strategy(c, strategy):
    """applyMIGConfiguration."""
    if not strategy:
        _set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")
        return
    _set_env(c, "MIG_STRATEGY", strategy)
    if strategy != "none":
        _set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def _configmap_data(docs, name):
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name:
            return d["data"]
    raise KeyError(name)


def render_operator(policy):
    """The operand DaemonSets as the Operator renders them for `policy` (a ClusterPolicy
    spec subset: devicePlugin/gfd/migManager/validator {image, config, env}, mig.strategy),
    with the ConfigMaps their volumes name. Returns {"daemonsets": {name: ds},
    "configmaps": {name: data}}."""
    strategy = policy.get("mig", {}).get("strategy", "single")
    out = {"daemonsets": {}, "configmaps": {}}
    # device plugin
    docs = _load("state-device-plugin/0400_configmap.yaml")
    out["configmaps"]["nvidia-device-plugin-entrypoint"] = _configmap_data(
        docs, "nvidia-device-plugin-entrypoint")
    ds = _load("state-device-plugin/0500_daemonset.yaml")[0]
    spec = ds["spec"]["template"]["spec"]
    _validation_init(spec, policy)
    main = _named(spec["containers"], "nvidia-device-plugin")
    main["image"] = policy["devicePlugin"]["image"]
    _plugin_config(ds, policy)
    _mig_strategy(main, strategy)
    for e in policy["devicePlugin"].get("env", []):
        _set_env(main, e["name"], e["value"])
    out["daemonsets"]["nvidia-device-plugin-daemonset"] = ds
    # gpu-feature-discovery (its image is gfd's; the config-manager containers the plugin's)
    ds = _load("gpu-feature-discovery/0500_daemonset.yaml")[0]
    spec = ds["spec"]["template"]["spec"]
    _validation_init(spec, policy)
    spec["containers"][0]["image"] = policy["gfd"]["image"]
    for e in policy["gfd"].get("env", []):
        _set_env(spec["containers"][0], e["name"], e["value"])
    _plugin_config(ds, policy)
    _mig_strategy(spec["containers"][0], strategy)
    out["daemonsets"]["gpu-feature-discovery"] = ds
    # MPS control daemon (the device plugin's image)
    ds = _load("state-mps-control-daemon/0400_daemonset.yaml")[0]
    spec = ds["spec"]["template"]["spec"]
    _validation_init(spec, policy)
    _named(spec["initContainers"], "mps-control-daemon-mounts")["image"] = \
        policy["devicePlugin"]["image"]
    main = _named(spec["containers"], "mps-control-daemon-ctr")
    main["image"] = policy["devicePlugin"]["image"]
    _plugin_config(ds, policy)
    _mig_strategy(main, strategy)
    out["daemonsets"]["nvidia-device-plugin-mps-control-daemon"] = ds
    # MIG manager
    docs = (_load("state-mig-manager/0400_configmap.yaml") +
            _load("state-mig-manager/0410_configmap.yaml") +
            _load("state-mig-manager/0420_configmap.yaml"))
    for name in ("default-mig-parted-config", "default-gpu-clients",
                 "nvidia-mig-manager-entrypoint"):
        out["configmaps"][name] = _configmap_data(docs, name)
    ds = _load("state-mig-manager/0600_daemonset.yaml")[0]
    spec = ds["spec"]["template"]["spec"]
    _validation_init(spec, policy)
    main = spec["containers"][0]
    main["image"] = policy["migManager"]["image"]
    custom = policy["migManager"].get("config", {}).get("name")
    for v in spec["volumes"]:
        if "mig-parted-config" in v["name"]:
            v["configMap"]["name"] = custom or "default-mig-parted-config"
            if not custom:  # the default is mounted as config-default.yaml
                v["configMap"]["items"] = [{"key": "config.yaml", "path": "config-default.yaml"}]
        if "gpu-clients" in v["name"]:
            v["configMap"]["name"] = "default-gpu-clients"
    if custom:
        _set_env(main, "CONFIG_FILE", "/mig-parted-config/config.yaml")
    else:
        _set_env(main, "DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml")
    for e in policy["migManager"].get("env", []):
        _set_env(main, e["name"], e["value"])
    out["daemonsets"]["nvidia-mig-manager"] = ds
    for ds in out["daemonsets"].values():
        ds["metadata"]["namespace"] = NAMESPACE
    return out


# ---- a Go-template subset for NVIDIA's DRA chart ---------------------------------------------

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


def _tokens(text):
    """[("text", s) | ("action", s)] with Go's {{- / -}} whitespace trimming applied."""
    out, pos = [], 0
    for m in _ACTION.finditer(text):
        out.append(["text", text[pos:m.start()]])
        if m.group(1):
            out[-1][1] = out[-1][1].rstrip(" \t\r\n")
        out.append(["action", m.group(2), bool(m.group(3))])
        pos = m.end()
    out.append(["text", text[pos:]])
    for i, t in enumerate(out):
        if t[0] == "action" and t[2] and i + 1 < len(out):
            out[i + 1][1] = out[i + 1][1].lstrip(" \t\r\n")
    return [(t[0], t[1]) for t in out if t[0] == "action" or t[1]]


def _parse(tokens, i=0, stop=("end",)):
    """A tree of ("text", s), ("expr", s), ("if", [(cond, body)...], else_body),
    ("with", expr, body, else), ("range", expr, body), ("define", name, body)."""
    nodes = []
    while i < len(tokens):
        kind, s = tokens[i]
        if kind == "text":
            nodes.append(("text", s))
            i += 1
            continue
        if s.startswith("/*"):
            i += 1
            continue
        word = s.split(None, 1)[0] if s else ""
        if word in stop or (word == "else" and "else" in stop):
            return nodes, i
        if word in ("if", "with", "range", "define"):
            arg = s[len(word):].strip()
            branches, els = [], None
            body, i = _parse(tokens, i + 1, ("end", "else"))
            branches.append((arg, body))
            while tokens[i][1].startswith("else"):
                rest = tokens[i][1][4:].strip()
                if rest.startswith("if "):
                    body, i = _parse(tokens, i + 1, ("end", "else"))
                    branches.append((rest[3:].strip(), body))
                else:
                    els, i = _parse(tokens, i + 1, ("end",))
            i += 1  # end
            nodes.append((word, branches, els))
            continue
        nodes.append(("expr", s))
        i += 1
    return nodes, i


def _split_args(s):
    """Words of a command: strings, parenthesised sub-pipelines, other words."""
    out, i = [], 0
    while i < len(s):
        if s[i].isspace():
            i += 1
        elif s[i] == '"':
            j = i + 1
            while s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i:j + 1])
            i = j + 1
        elif s[i] == "(":
            depth, j = 0, i
            while True:
                depth += {"(": 1, ")": -1}.get(s[j], 0)
                if depth == 0:
                    break
                j += 1
            out.append(s[i:j + 1])
            i = j + 1
        else:
            j = i
            while j < len(s) and not s[j].isspace():
                j += 1
            out.append(s[i:j])
            i = j
    return out


def _pipes(s):
    parts, depth, quote, cur = [], 0, False, ""
    for ch in s:
        if ch == '"' and not cur.endswith("\\"):
            quote = not quote
        if not quote:
            depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "|" and depth == 0 and not quote:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _to_yaml(v):
    if v in (None, {}, []):
        return "{}" if isinstance(v, dict) or v is None else "[]"
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n")


def _str(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


class Chart:
    def __init__(self, chart_dir, values, release="nvidia-dra-driver-gpu",
                 namespace="nvidia-dra-driver-gpu"):
        with open(os.path.join(chart_dir, "Chart.yaml")) as f:
            chart = yaml.safe_load(f)
        with open(os.path.join(chart_dir, "values.yaml")) as f:
            vals = yaml.safe_load(f)
        _merge(vals, values)
        self.root = {"Values": vals,
                     "Chart": {"Name": chart["name"], "Version": str(chart["version"]),
                               "AppVersion": str(chart["appVersion"])},
                     "Release": {"Name": release, "Namespace": namespace, "Service": "Helm"}}
        self.defines = {}
        with open(os.path.join(chart_dir, "templates/_helpers.tpl")) as f:
            for node in _parse(_tokens(f.read()))[0]:
                if node[0] == "define":
                    self.defines[node[1][0][0].strip('"')] = node[1][0][1]
        self.chart_dir = chart_dir

    def render(self, template):
        with open(os.path.join(self.chart_dir, "templates", template)) as f:
            tree = _parse(_tokens(f.read()))[0]
        return [d for d in yaml.safe_load_all(self._run(tree, self.root, {})) if d]

    def _run(self, nodes, dot, var):
        out = []
        for n in nodes:
            if n[0] == "text":
                out.append(n[1])
            elif n[0] == "expr":
                out.append(_str(self._pipeline(n[1], dot, var)))
            elif n[0] == "if":
                for cond, body in n[1]:
                    if _truthy(self._pipeline(cond, dot, var)):
                        out.append(self._run(body, dot, var))
                        break
                else:
                    if n[2]:
                        out.append(self._run(n[2], dot, var))
            elif n[0] == "with":
                v = self._pipeline(n[1][0][0], dot, var)
                if _truthy(v):
                    out.append(self._run(n[1][0][1], v, var))
                elif n[2]:
                    out.append(self._run(n[2], dot, var))
            elif n[0] == "range":
                raise NotImplementedError("range over " + n[1][0][0])
        return "".join(out)

    def _pipeline(self, s, dot, var):
        if s.startswith("$") and ":=" in s:  # $name := pipeline
            name, expr = s.split(":=", 1)
            var[name.strip()] = self._pipeline(expr.strip(), dot, var)
            return ""
        v, first = None, True
        for part in _pipes(s):
            words = _split_args(part.strip())
            v = self._call(words, dot, var, None if first else (v,))
            first = False
        return v

    def _term(self, w, dot, var):
        if w.startswith('"'):
            return w[1:-1].encode().decode("unicode_escape")
        if w.startswith("("):
            return self._pipeline(w[1:-1], dot, var)
        if w == ".":
            return dot
        if w.startswith("$"):
            name, _, path = w.partition(".")
            return _walk(var[name], path) if path else var[name]
        if w.startswith("."):
            return _walk(dot, w[1:])
        if re.fullmatch(r"-?\d+", w):
            return int(w)
        if w in ("true", "false"):
            return w == "true"
        return self._call([w], dot, var, None)

    def _call(self, words, dot, var, piped):
        name, args = words[0], words[1:]
        if not _is_func(name):
            return self._term(name, dot, var)
        a = [self._term(w, dot, var) for w in args] + list(piped or ())
        fn = {
            "include": lambda n, d: self._run(self.defines[n], d, {}),
            "toYaml": _to_yaml,
            "nindent": lambda n, s: "\n" + "\n".join(" " * n + l if l else l
                                                     for l in _str(s).split("\n")),
            "indent": lambda n, s: "\n".join(" " * n + l for l in _str(s).split("\n")),
            "quote": lambda *x: " ".join('"%s"' % _str(v).replace('"', '\\"') for v in x),
            "default": lambda d, v=None: v if _truthy(v) else d,
            "eq": lambda x, y: x == y,
            "gt": lambda x, y: x > y,
            "and": lambda *x: next((v for v in x if not _truthy(v)), x[-1]),
            "or": lambda *x: next((v for v in x if _truthy(v)), x[-1]),
            "not": lambda x: not _truthy(x),
            "int": lambda x: int(x or 0),
            "hasKey": lambda d, k: isinstance(d, dict) and k in d,
            "dir": lambda p: os.path.dirname(p) or ".",
            "trimSuffix": lambda suf, s: s[:-len(suf)] if suf and s.endswith(suf) else s,
            "trunc": lambda n, s: s[:n],
            "printf": lambda f, *x: re.sub(r"%[sdv]", "{}", f).format(*x),
            "replace": lambda old, new, s: s.replace(old, new),
            "contains": lambda sub, s: sub in s,
            "dict": lambda *kv: dict(zip(kv[0::2], kv[1::2])),
        }[name]
        return fn(*a)


_FUNCS = ("include toYaml nindent indent quote default eq gt and or not int hasKey dir "
          "trimSuffix trunc printf replace contains dict").split()


def _is_func(w):
    return w in _FUNCS


def _truthy(v):
    return bool(v) and v != 0


def _walk(d, path):
    for k in filter(None, path.split(".")):
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = v


def render_dra_chart(values, version="25.12.0"):
    """NVIDIA's DRA chart's kubelet plugin DaemonSet for `values` (over values.yaml), from
    the chart of `version` (a key of DRA_CHARTS)."""
    chart_dir, release = DRA_CHARTS[version]
    return Chart(chart_dir, values, release=release, namespace=release).render(
        "kubeletplugin.yaml")


if __name__ == "__main__":
    import sys
    img = sys.argv[1] if len(sys.argv) > 1 else "localhost/gpuslice:dev"
    repo, _, tag = img.rpartition(":")
    print(yaml.safe_dump_all(render_dra_chart(
        {"image": {"repository": repo, "tag": tag}}), sort_keys=False))
