#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# cdi_schema.py: checks a CDI spec against the rules of the CDI specification (v1.1.0
# SPEC.md, specs-go/config.go and schema/schema.json as summarised in
# shared/facts/kubelet-apis.md §4.4): required fields, the fields each object may have and
# their types, the version a field needs, kind and device name grammar, unique names.
# Usage as a module: problems(spec_dict) -> list of strings; or `cdi_schema.py FILE...`.
import json
import re
import sys

VENDOR_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
CLASS_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
SEMVER_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
HOOK_NAMES = {"createRuntime", "createContainer", "startContainer", "poststart", "poststop",
              "prestart"}

SPEC_KEYS = {"cdiVersion": str, "kind": str, "annotations": dict, "devices": list,
             "containerEdits": dict}
DEVICE_KEYS = {"name": str, "annotations": dict, "containerEdits": dict}
EDIT_KEYS = {"env": list, "deviceNodes": list, "mounts": list, "hooks": list,
             "additionalGids": list, "intelRdt": dict, "netDevices": list}
NODE_KEYS = {"path": str, "hostPath": str, "type": str, "major": int, "minor": int,
             "fileMode": int, "permissions": str, "uid": int, "gid": int}
MOUNT_KEYS = {"hostPath": str, "containerPath": str, "options": list, "type": str}
HOOK_KEYS = {"hookName": str, "path": str, "args": list, "env": list, "timeout": int}
# the version each field first appeared in (facts §4.4)
SINCE = {"annotations": (0, 6, 0), "hostPath@node": (0, 5, 0), "type@mount": (0, 4, 0),
         "additionalGids": (0, 7, 0), "intelRdt": (0, 7, 0), "netDevices": (1, 1, 0)}


def _obj(where, v, keys, required, out):
    if not isinstance(v, dict):
        out.append("%s: not an object" % where)
        return False
    for k in v:
        if k not in keys:
            out.append("%s: unknown field %r" % (where, k))
        elif not isinstance(v[k], keys[k]) or (keys[k] is int and isinstance(v[k], bool)):
            out.append("%s.%s: wrong type %s" % (where, k, type(v[k]).__name__))
    for k in required:
        if k not in v:
            out.append("%s: missing required %r" % (where, k))
    return True


def _need(version, field, where, out):
    if version < SINCE[field]:
        out.append("%s: %s needs cdiVersion >= %s" % (where, field.split("@")[0],
                                                      ".".join(map(str, SINCE[field]))))


def _edits(where, e, version, out):
    if not _obj(where, e, EDIT_KEYS, (), out):
        return
    for f in ("additionalGids", "intelRdt", "netDevices"):
        if f in e:
            _need(version, f, where, out)
    for i, s in enumerate(e.get("env", [])):
        if not isinstance(s, str) or "=" not in s:
            out.append("%s.env[%d]: not KEY=VALUE" % (where, i))
    for i, n in enumerate(e.get("deviceNodes", [])):
        w = "%s.deviceNodes[%d]" % (where, i)
        if _obj(w, n, NODE_KEYS, ("path",), out):
            if "hostPath" in n:
                _need(version, "hostPath@node", w, out)
            for k in ("path", "hostPath"):
                if k in n and not str(n[k]).startswith("/"):
                    out.append("%s.%s: not absolute" % (w, k))
    for i, m in enumerate(e.get("mounts", [])):
        w = "%s.mounts[%d]" % (where, i)
        if _obj(w, m, MOUNT_KEYS, ("hostPath", "containerPath"), out):
            if "type" in m:
                _need(version, "type@mount", w, out)
            if not all(isinstance(o, str) for o in m.get("options", [])):
                out.append("%s.options: not strings" % w)
    for i, h in enumerate(e.get("hooks", [])):
        w = "%s.hooks[%d]" % (where, i)
        if _obj(w, h, HOOK_KEYS, ("hookName", "path"), out):
            if h.get("hookName") not in HOOK_NAMES:
                out.append("%s.hookName: %r is not a hook name" % (w, h.get("hookName")))
            if not str(h.get("path", "")).startswith("/"):
                out.append("%s.path: not absolute" % w)
            for k in ("args", "env"):
                if not all(isinstance(a, str) for a in h.get(k, [])):
                    out.append("%s.%s: not strings" % (w, k))


def problems(spec):
    out = []
    if not _obj("spec", spec, SPEC_KEYS, ("cdiVersion", "kind", "devices"), out):
        return out
    m = SEMVER_RE.match(str(spec.get("cdiVersion", "")))
    if not m:
        out.append("cdiVersion %r is not a version" % spec.get("cdiVersion"))
        return out
    version = tuple(int(x) for x in m.groups())
    if version > (1, 1, 0):
        out.append("cdiVersion %s is newer than 1.1.0" % spec["cdiVersion"])
    kind = str(spec.get("kind", ""))
    vendor, _, cls = kind.partition("/")
    if not (VENDOR_RE.match(vendor) and CLASS_RE.match(cls)):
        out.append("kind %r is not vendor/class" % kind)
    if "annotations" in spec:
        _need(version, "annotations", "spec", out)
    devices = spec.get("devices", [])
    if not devices:
        out.append("devices: at least one is required")
    seen = set()
    for i, d in enumerate(devices):
        w = "devices[%d]" % i
        if not _obj(w, d, DEVICE_KEYS, ("name", "containerEdits"), out):
            continue
        name = str(d.get("name", ""))
        if not NAME_RE.match(name):
            out.append("%s.name %r is not a device name" % (w, name))
        if name in seen:
            out.append("%s.name %r is not unique" % (w, name))
        seen.add(name)
        if "annotations" in d:
            _need(version, "annotations", w, out)
        _edits(w + ".containerEdits", d.get("containerEdits", {}), version, out)
        ce = d.get("containerEdits", {})
        if isinstance(ce, dict) and not any(ce.get(k) for k in EDIT_KEYS):
            out.append("%s: empty device edits" % w)
    if "containerEdits" in spec:
        _edits("containerEdits", spec["containerEdits"], version, out)
    return out


if __name__ == "__main__":
    bad = 0
    for path in sys.argv[1:]:
        with open(path) as f:
            for p in problems(json.load(f)):
                print("%s: %s" % (path, p))
                bad = 1
    sys.exit(bad)
