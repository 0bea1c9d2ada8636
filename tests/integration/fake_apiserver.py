#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# fake_apiserver.py: a small Kubernetes API server for the tests (standard library only).
# Serves nodes (GET, list with resourceVersion, chunked watch streams with the real JSON
# shapes, 410 after compaction, bookmarks) and POST events over HTTP or HTTPS (optionally
# requiring client certificates), plus /_test/* control endpoints on the API port and on a
# control port that stays up while the API port is "down". What a real API server enforces
# is enforced here with its texts: Event namespace validation (legacyValidateEvent), RBAC
# refusals naming verb and resource (/_test/deny), NotFound details, and a plain-text
# "404 page not found" for an API group that is not installed (/_test/no-group).
# resource.k8s.io (DRA): ResourceSlices (cluster-scoped; fieldSelector on spec.driver and
# spec.nodeName, generateName, resourceVersion conflicts, delete preconditions, the real
# validation of driver/pool/node/devices/attributes/ownerReferences with its texts),
# ResourceClaims (namespaced; status as given on create or PUT to /status) and DeviceClasses,
# in v1, v1beta2 and v1beta1 (devices under "basic"); which versions are served is chosen
# with --dra-versions or /_test/dra-versions.
import argparse
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


class State:
    def __init__(self, nodes, token, token_file):
        self.cond = threading.Condition()
        self.rv = 100
        self.nodes = {}
        self.history = []  # (rv, type, node object) in order
        self.compacted_rv = 0
        self.generation = 0  # bumped to drop every open watch
        self.events = []
        self.objects = {}  # API path of an item -> object (custom resources: NodeFeature)
        self.requests = []
        self.watches_open = 0
        self.forbid = False
        self.denied = set()  # (verb, API group, resource) that RBAC refuses
        self.missing_groups = set()  # API groups not installed (CRD absent)
        self.always_gone = False  # every watch answers 410 Gone at once
        self.stall_s = 0.0  # every API request (not /_test) waits this long first
        self.fail_patches = False  # every node PATCH answers 500 (an API server restarting)
        self.failed_patches = 0
        # the next fail_events Event POSTs answer fail_events_code; with fail_events_store the
        # Event is stored first (its answer is lost, as when a connection breaks after commit)
        self.fail_events = 0
        self.fail_events_code = 503
        self.fail_events_store = False
        self.failed_events = 0
        self.token = token
        self.token_file = token_file
        self.dra_versions = list(DRA_VERSIONS)  # served, newest first; [] = no group
        # resource -> {(namespace or "", name): object}; ResourceSlices in the v1 shape
        self.dra = {r: {} for r in DRA_RESOURCES}
        self.dra_history = []  # (rv, type, resource or None for a bookmark, object) in order
        for name in nodes:
            self.nodes[name] = self.new_node(name)

    def next_rv(self):
        self.rv += 1
        return str(self.rv)

    def new_node(self, name):
        return {
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "uid": str(uuid.uuid4()),
                         "resourceVersion": self.next_rv(),
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": "10.244.0.0/24"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "capacity": {"cpu": "8", "memory": "32Gi"}},
        }

    def record(self, etype, node):
        obj = json.loads(json.dumps(node))
        self.history.append((int(node["metadata"]["resourceVersion"]), etype, obj))
        self.cond.notify_all()

    def set_label(self, name, key, value, quiet=False):
        with self.cond:
            node = self.nodes.get(name)
            created = node is None
            if created:
                node = self.nodes[name] = self.new_node(name)
            labels = node["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
            node["metadata"]["resourceVersion"] = self.next_rv()
            if not quiet:  # quiet: as if the event were lost (only a list shows it)
                self.record("ADDED" if created else "MODIFIED", node)
            return node["metadata"]["resourceVersion"]

    def delete_node(self, name):
        with self.cond:
            node = self.nodes.pop(name, None)
            if node:
                node["metadata"]["resourceVersion"] = self.next_rv()
                self.record("DELETED", node)

    def compact(self):
        # As etcd after other objects changed: every resourceVersion handed out so far is
        # too old to watch from; a new list gives one that is not.
        with self.cond:
            self.compacted_rv = int(self.next_rv())
            self.history = []
            self.dra_history = []

    def drop_watches(self):
        with self.cond:
            self.generation += 1
            self.cond.notify_all()

    def bookmark(self):
        with self.cond:
            self.history.append((self.rv, "BOOKMARK", None))
            self.dra_history.append((self.rv, "BOOKMARK", None, None))
            self.cond.notify_all()

    def dra_record(self, etype, resource, obj):
        """A DRA change for watches (the caller holds cond and has bumped rv)."""
        self.dra_history.append((self.rv, etype, resource, json.loads(json.dumps(obj))))
        self.cond.notify_all()


def status(code, reason, message, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details:
        st["details"] = details
    return st


def qualified(group, resource):
    return resource + ("." + group if group else "")


def not_found(group, resource, name):
    """The real NotFound: names the object, with details (kubectl reads them)."""
    return status(404, "NotFound", '%s "%s" not found' % (qualified(group, resource), name),
                  {"name": name, "group": group, "kind": resource})


def request_attributes(method, parts, q):
    """RBAC's view of a request: (verb, group, resource, namespace or None, name or None)."""
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    if method == "GET":
        verb = "watch" if q.get("watch") in ("true", "1") else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
    return verb, group, resource, ns, name


def forbidden(verb, group, resource, ns, name):
    """RBAC's 403, word for word as kube-apiserver writes it."""
    what = qualified(group, resource)
    scope = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
    msg = ('%s%s is forbidden: User "system:serviceaccount:gpuslice:gpuslice" cannot %s '
           'resource "%s" in API group "%s" %s' % (what, ' "%s"' % name if name else "", verb,
                                                  resource, group, scope))
    details = {"group": group, "kind": resource}
    if name:
        details["name"] = name
    return status(403, "Forbidden", msg, details)


def validate_event(ev, url_ns):
    """What kube-apiserver checks of a core/v1 Event: (code, Status) or None when valid."""
    meta = ev.get("metadata", {})
    name = meta.get("name", "")
    obj_ns = meta.get("namespace", url_ns)
    if obj_ns != url_ns:
        return 400, status(400, "BadRequest", "the namespace of the provided object does not "
                                              "match the namespace sent on the request")
    missing = [f for f in ("reason", "message", "type", "involvedObject") if f not in ev]
    if missing:
        return 422, status(422, "Invalid", "bad event: %s" % missing)
    # legacyValidateEvent (pkg/apis/core/validation/events.go): an Event about a
    # cluster-scoped object (no involvedObject.namespace) lives in "" or "default"; about a
    # namespaced one, in that object's namespace.
    inv_ns = ev["involvedObject"].get("namespace", "")
    if (inv_ns == "" and obj_ns not in ("", "default")) or (inv_ns and inv_ns != obj_ns):
        cause = 'Invalid value: "%s": does not match event.namespace' % inv_ns
        return 422, status(422, "Invalid", 'Event "%s" is invalid: involvedObject.namespace: %s'
                           % (name, cause),
                           {"name": name, "kind": "Event",
                            "causes": [{"reason": "FieldValueInvalid", "message": cause,
                                        "field": "involvedObject.namespace"}]})
    return None


# ---- resource.k8s.io ---------------------------------------------------------------------

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")
DRA_RESOURCES = {"resourceslices": ("ResourceSlice", False),
                 "resourceclaims": ("ResourceClaim", True),
                 "deviceclasses": ("DeviceClass", False)}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)"
                      r"([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
MAX_DEVICES = 128  # ResourceSliceMaxDevices
MAX_ATTRS_AND_CAPS = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


def dns_errors(value, subdomain=False):
    """validation.IsDNS1123Label/Subdomain's texts."""
    limit = 253 if subdomain else 63
    if len(value) > limit:
        return "must be no more than %d characters" % limit
    if not (DNS_SUBDOMAIN if subdomain else DNS_LABEL).match(value):
        what = "RFC 1123 subdomain" if subdomain else "RFC 1123 label"
        return ("a lowercase %s must consist of lower case alphanumeric characters%s '-', and "
                "must start and end with an alphanumeric character" %
                (what, ", '-' or '.'" if subdomain else " or"))
    return None


def qualified_name_errors(name):
    """A device attribute or capacity name: [<DNS subdomain>/]<C identifier, at most 32>."""
    domain, _, ident = name.rpartition("/")
    if domain:
        e = dns_errors(domain, subdomain=True)
        if e or len(domain) > 63:
            return e or "the domain must be no more than 63 characters"
    if not C_IDENTIFIER.match(ident):
        return "a valid C identifier must start with alphabetic character or '_', followed by " \
               "a string of alphanumeric characters or '_'"
    if len(ident) > 32:
        return "must be no more than 32 characters"
    return None


def validate_owner_refs(meta, errs):
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        errs.append(("metadata.ownerReferences", "Invalid value", "must be a list"))
        return
    controllers = 0
    for i, ref in enumerate(refs):
        path = "metadata.ownerReferences[%d]" % i
        for f in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, dict) or not ref.get(f):
                errs.append(("%s.%s" % (path, f), "Invalid value",
                             "%s must not be empty" % f))
        if isinstance(ref, dict) and ref.get("controller") is True:
            controllers += 1
    if controllers > 1:
        errs.append(("metadata.ownerReferences", "Invalid value",
                     "Only one reference can have Controller set to true"))


def validate_device(i, dev, errs):
    path = "spec.devices[%d]" % i
    name = dev.get("name", "")
    if not name:
        errs.append((path + ".name", "Required value", ""))
    else:
        e = dns_errors(name)
        if e:
            errs.append((path + ".name", 'Invalid value: "%s"' % name, e))
    attrs = dev.get("attributes") or {}
    caps = dev.get("capacity") or {}
    for key, value in attrs.items():
        e = qualified_name_errors(key)
        if e:
            errs.append(("%s.attributes[%s]" % (path, key), 'Invalid value: "%s"' % key, e))
        given = [t for t in ATTRIBUTE_TYPES if isinstance(value, dict) and t in value]
        if len(given) != 1:
            errs.append(("%s.attributes[%s]" % (path, key), "Invalid value",
                         "exactly one value must be specified"))
    for key, value in caps.items():
        e = qualified_name_errors(key)
        if e:
            errs.append(("%s.capacity[%s]" % (path, key), 'Invalid value: "%s"' % key, e))
        q = value.get("value") if isinstance(value, dict) else None
        if not isinstance(q, str) or not QUANTITY.match(q):
            errs.append(("%s.capacity[%s].value" % (path, key), "Invalid value",
                         "quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
    n = len(attrs) + len(caps)
    if n > MAX_ATTRS_AND_CAPS:
        errs.append((path, "Invalid value: %d" % n,
                     "the total number of attributes and capacities must not exceed %d" %
                     MAX_ATTRS_AND_CAPS))


def validate_slice(obj):
    """What kube-apiserver's ResourceSlice validation says: [(field, type, detail)]."""
    errs = []
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    validate_owner_refs(meta, errs)
    if not isinstance(spec, dict):
        return errs + [("spec", "Required value", "")]
    driver = spec.get("driver") or ""
    if not driver:
        errs.append(("spec.driver", "Required value", ""))
    elif dns_errors(driver, subdomain=True) or len(driver) > 63:
        errs.append(("spec.driver", 'Invalid value: "%s"' % driver,
                     dns_errors(driver, subdomain=True) or "must be no more than 63 characters"))
    pool = spec.get("pool")
    if not isinstance(pool, dict) or not pool.get("name"):
        errs.append(("spec.pool.name", "Required value", ""))
    elif not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] <= 0:
        errs.append(("spec.pool.resourceSliceCount", "Invalid value: %r" %
                     pool.get("resourceSliceCount"), "must be greater than zero"))
    elif not isinstance(pool.get("generation", 0), int) or pool.get("generation", 0) < 0:
        errs.append(("spec.pool.generation", "Invalid value", "must be greater than or equal "
                                                               "to 0"))
    where = [f for f in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
             if spec.get(f)]
    if len(where) != 1:
        errs.append(("spec", "Required value" if not where else "Invalid value",
                     "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                     "`perDeviceNodeSelection` is required"))
    devices = spec.get("devices") or []
    if len(devices) > MAX_DEVICES:
        errs.append(("spec.devices", "Too many: %d" % len(devices),
                     "must have at most %d items" % MAX_DEVICES))
    names = set()
    for i, dev in enumerate(devices):
        validate_device(i, dev, errs)
        if dev.get("name") in names:
            errs.append(("spec.devices[%d].name" % i, 'Duplicate value: "%s"' % dev["name"],
                         ""))
        names.add(dev.get("name"))
    return errs


def invalid(kind, name, errs):
    """The 422 Status of a failed validation, as kube-apiserver words it."""
    texts = ["%s: %s%s" % (f, t, (": " + d) if d else "") for f, t, d in errs]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return status(422, "Invalid", '%s.%s "%s" is invalid: %s' % (kind, DRA_GROUP, name, joined),
                  {"name": name, "group": DRA_GROUP, "kind": kind,
                   "causes": [{"reason": "FieldValueInvalid", "message": "%s%s" %
                               (t, (": " + d) if d else ""), "field": f} for f, t, d in errs]})


def slice_from_version(obj, version):
    """A v1beta1 body → the stored v1 shape (device fields under "basic" moved up)."""
    obj = json.loads(json.dumps(obj))
    if version != "v1beta1":
        return obj, []
    errs = []
    for i, dev in enumerate((obj.get("spec") or {}).get("devices") or []):
        basic = dev.pop("basic", None)
        extra = [k for k in dev if k != "name"]
        if extra:
            errs.append(("spec.devices[%d]" % i, "Invalid value",
                         'unknown field(s) %s (v1beta1 keeps them under "basic")' % extra))
        if not isinstance(basic, dict):
            errs.append(("spec.devices[%d].basic" % i, "Required value", ""))
        else:
            dev.update(basic)
    return obj, errs


def slice_to_version(obj, version):
    obj = json.loads(json.dumps(obj))
    obj["apiVersion"] = "%s/%s" % (DRA_GROUP, version)
    if version == "v1beta1":
        for dev in (obj.get("spec") or {}).get("devices") or []:
            basic = {k: dev.pop(k) for k in list(dev) if k != "name"}
            dev["basic"] = basic
    return obj


def field_selector(text):
    """fieldSelector "a=b,c=d" → dict, or None for an unsupported field."""
    out = {}
    for part in filter(None, (text or "").split(",")):
        k, _, v = part.partition("=")
        if k not in ("spec.driver", "spec.nodeName", "metadata.name"):
            return None
        out[k] = v
    return out


def slice_field(obj, key):
    if key == "metadata.name":
        return obj["metadata"].get("name")
    return (obj.get("spec") or {}).get(key.split(".", 1)[1])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("fake-apiserver: " + (fmt % args) + "\n")

    @property
    def st(self):
        return self.server.state

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def client_cn(self):
        """The CN of a verified TLS client certificate, None without one."""
        getpeercert = getattr(self.connection, "getpeercert", None)
        cert = getpeercert() if getpeercert else None
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return None

    def authorized(self):
        want = self.st.token
        if self.st.token_file:
            with open(self.st.token_file) as f:
                want = f.read().strip()
        if want is None:
            return True
        if self.headers.get("Authorization") == "Bearer " + want:
            return True
        self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
        return False

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def plain_404(self):
        # kube-apiserver's NotFound handler for a path nobody serves: plain text
        body = b"404 page not found\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def dra(self, method, parts, q, body):
        """/apis/resource.k8s.io[/<version>[/namespaces/<ns>][/<resource>[/<name>]]]."""
        with self.st.cond:
            served = list(self.st.dra_versions)
        if len(parts) == 2 and served:  # the group's discovery document
            vs = [{"groupVersion": "%s/%s" % (DRA_GROUP, v), "version": v} for v in served]
            return self.send_json(200, {"kind": "APIGroup", "apiVersion": "v1",
                                        "name": DRA_GROUP, "versions": vs,
                                        "preferredVersion": vs[0]})
        if len(parts) < 3 or parts[2] not in served:
            return self.plain_404()
        version = parts[2]
        if len(parts) == 3:  # the version's discovery document
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            return self.send_json(200, {
                "kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "%s/%s" % (DRA_GROUP, version),
                "resources": [{"name": r, "namespaced": nsd, "kind": k, "verbs": verbs}
                              for r, (k, nsd) in sorted(DRA_RESOURCES.items())]})
        rest, ns = parts[3:], None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if rest[2:] == ["status"] and rest[0] == "resourceclaims" and method == "PUT":
            return self.dra_claim_status((version, rest[0], ns), rest[1], body)
        if (not rest or rest[0] not in DRA_RESOURCES or len(rest) > 2
                or (ns is not None and not DRA_RESOURCES[rest[0]][1])):
            return self.send_json(404, status(404, "NotFound", "the server could not find "
                                                               "the requested resource"))
        resource, name = rest[0], (rest[1] if len(rest) == 2 else None)
        try:
            obj = json.loads(body) if body else None
        except ValueError:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON"))
        ctx = (version, resource, ns)
        if method == "GET" and name is None:
            if q.get("watch") in ("true", "1"):
                return self.dra_watch(ctx, q)
            return self.dra_list(ctx, q)
        if DRA_RESOURCES[resource][1] and ns is None:
            return self.send_json(404, status(404, "NotFound", "the server could not find "
                                                               "the requested resource"))
        if method == "POST" and name is None:
            return self.dra_create(ctx, obj)
        if name is None:
            return self.send_json(405, status(405, "MethodNotAllowed", method))
        with self.st.cond:
            old = self.st.dra[resource].get((ns or "", name))
        if old is None:
            return self.send_json(404, not_found(DRA_GROUP, resource, name))
        if method == "GET":
            return self.send_json(200, self.dra_out(ctx, old))
        if method == "PUT":
            return self.dra_update(ctx, name, obj)
        if method == "DELETE":
            return self.dra_delete(ctx, name, obj)
        return self.send_json(405, status(405, "MethodNotAllowed", method))

    def dra_claim_status(self, ctx, name, body):
        """PUT .../resourceclaims/<name>/status: what the scheduler writes (allocation).
        The stand-in also keeps a status given on create, so tests can skip this step."""
        _, resource, ns = ctx
        try:
            obj = json.loads(body)
        except ValueError:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON"))
        with self.st.cond:
            old = self.st.dra[resource].get((ns or "", name))
            if old is None:
                return self.send_json(404, not_found(DRA_GROUP, resource, name))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                return self.dra_conflict(resource, name, "the object has been modified; please "
                                         "apply your changes to the latest version and try "
                                         "again")
            new = json.loads(json.dumps(old))
            new["status"] = obj.get("status") or {}
            new["metadata"]["resourceVersion"] = self.st.next_rv()
            self.st.dra[resource][(ns or "", name)] = new
            self.st.dra_record("MODIFIED", resource, new)
            out = self.dra_out(ctx, new)
        return self.send_json(200, out)

    @staticmethod
    def dra_out(ctx, obj):
        version, resource, _ = ctx
        if resource == "resourceslices":
            return slice_to_version(obj, version)
        out = json.loads(json.dumps(obj))
        out["apiVersion"] = "%s/%s" % (DRA_GROUP, version)
        return out

    def dra_list(self, ctx, q):
        version, resource, ns = ctx
        sel = field_selector(q.get("fieldSelector"))
        if sel is None:
            return self.send_json(400, status(400, "BadRequest", 'field label not supported: '
                                              '"%s"' % q.get("fieldSelector")))
        with self.st.cond:
            items = [self.dra_out(ctx, o) for (ons, _), o in sorted(self.st.dra[resource].items())
                     if (ns is None or ons == ns)
                     and all(slice_field(o, k) == v for k, v in sel.items())]
            rv = str(self.st.rv)
        return self.send_json(200, {"kind": DRA_RESOURCES[resource][0] + "List",
                                    "apiVersion": "%s/%s" % (DRA_GROUP, version),
                                    "metadata": {"resourceVersion": rv}, "items": items})

    def dra_watch(self, ctx, q):
        """A chunked watch of one DRA resource, as watch() is for nodes."""
        version, resource, ns = ctx
        st = self.st
        sel = field_selector(q.get("fieldSelector"))
        if sel is None:
            return self.send_json(400, status(400, "BadRequest", "field label not supported"))

        def match(o):
            return ((ns is None or o["metadata"].get("namespace", "") == ns)
                    and all(slice_field(o, k) == v for k, v in sel.items()))

        def added():
            return [self.dra_out(ctx, o) for _, o in sorted(st.dra[resource].items()) if match(o)]

        def events(since):
            return [(r, t, self.dra_out(ctx, o) if res == resource and match(o) else None)
                    for r, t, res, o in st.dra_history if r > since]

        def bookmark(rv):
            return {"kind": DRA_RESOURCES[resource][0],
                    "apiVersion": "%s/%s" % (DRA_GROUP, version),
                    "metadata": {"resourceVersion": str(rv)}}
        return self.serve_watch(q, added, events, bookmark)

    def dra_check(self, ctx, obj, name):
        """(stored form, None) or (None, (code, Status))."""
        version, resource, ns = ctx
        kind = DRA_RESOURCES[resource][0]
        if not isinstance(obj, dict):
            return None, (400, status(400, "BadRequest", "the body is not a %s object" % kind))
        if obj.get("kind") not in (None, kind):
            return None, (400, status(400, "BadRequest", 'the kind "%s" does not match "%s"' %
                                      (obj.get("kind"), kind)))
        if obj.get("apiVersion") not in (None, "%s/%s" % (DRA_GROUP, version)):
            return None, (400, status(400, "BadRequest", 'the apiVersion "%s" does not match '
                                      'the request\'s %s/%s' % (obj.get("apiVersion"), DRA_GROUP,
                                                                 version)))
        meta = obj.setdefault("metadata", {})
        if ns is not None and meta.setdefault("namespace", ns) != ns:
            return None, (400, status(400, "BadRequest", "the namespace of the provided object "
                                                         "does not match the namespace sent on "
                                                         "the request"))
        errs = []
        if resource == "resourceslices":
            obj, errs = slice_from_version(obj, version)
            errs += validate_slice(obj)
        else:
            validate_owner_refs(obj["metadata"], errs)
            if resource == "deviceclasses":
                for i, sel in enumerate((obj.get("spec") or {}).get("selectors") or []):
                    if not ((sel or {}).get("cel") or {}).get("expression"):
                        errs.append(("spec.selectors[%d].cel.expression" % i, "Required value",
                                     ""))
        e = dns_errors(name, subdomain=True) if name else None
        if e:
            errs.insert(0, ("metadata.name", 'Invalid value: "%s"' % name, e))
        if errs:
            return None, (422, invalid(kind, name, errs))
        obj["apiVersion"] = "%s/v1" % DRA_GROUP
        obj["kind"] = kind
        return obj, None

    def dra_create(self, ctx, obj):
        _, resource, ns = ctx
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = (meta or {}).get("name") or ""
        if not name and (meta or {}).get("generateName"):
            name = meta["generateName"] + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
                                                  for _ in range(5))
        if isinstance(meta, dict):
            meta["name"] = name
        if not name and isinstance(obj, dict):
            return self.send_json(422, invalid(DRA_RESOURCES[resource][0], "", [
                ("metadata.name", "Required value", "name or generateName is required")]))
        stored, refused = self.dra_check(ctx, obj, name)
        if refused:
            return self.send_json(*refused)
        with self.st.cond:
            key = (ns or "", name)
            if key in self.st.dra[resource]:
                return self.send_json(409, status(409, "AlreadyExists", '%s.%s "%s" already '
                                                  'exists' % (resource, DRA_GROUP, name),
                                                  {"name": name, "group": DRA_GROUP,
                                                   "kind": resource}))
            m = stored["metadata"]
            m.update({"uid": str(uuid.uuid4()), "resourceVersion": self.st.next_rv(),
                      "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "generation": 1})
            self.st.dra[resource][key] = stored
            self.st.dra_record("ADDED", resource, stored)
            out = self.dra_out(ctx, stored)
        return self.send_json(201, out)

    def dra_conflict(self, resource, name, detail):
        return self.send_json(409, status(409, "Conflict", 'Operation cannot be fulfilled on '
                                          '%s.%s "%s": %s' % (resource, DRA_GROUP, name, detail),
                                          {"name": name, "group": DRA_GROUP, "kind": resource}))

    def dra_update(self, ctx, name, obj):
        _, resource, ns = ctx
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and meta.get("name", name) != name:
            return self.send_json(400, status(400, "BadRequest", "the name of the object (%s) "
                                              "does not match the name on the URL (%s)" %
                                              (meta.get("name"), name)))
        if isinstance(meta, dict):
            meta["name"] = name
        stored, refused = self.dra_check(ctx, obj, name)
        if refused:
            return self.send_json(*refused)
        rv = stored["metadata"].get("resourceVersion")
        if not rv:
            return self.send_json(422, invalid(DRA_RESOURCES[resource][0], name, [
                ("metadata.resourceVersion", "Invalid value: 0x0",
                 "must be specified for an update")]))
        with self.st.cond:
            key = (ns or "", name)
            old = self.st.dra[resource].get(key)
            if old is None:
                return self.send_json(404, not_found(DRA_GROUP, resource, name))
            if old["metadata"]["resourceVersion"] != rv:
                return self.dra_conflict(resource, name, "the object has been modified; please "
                                         "apply your changes to the latest version and try "
                                         "again")
            m = stored["metadata"]
            for f in ("uid", "creationTimestamp"):
                m[f] = old["metadata"][f]
            m["generation"] = old["metadata"].get("generation", 1) + (
                stored.get("spec") != old.get("spec"))
            m["resourceVersion"] = self.st.next_rv()
            self.st.dra[resource][key] = stored
            self.st.dra_record("MODIFIED", resource, stored)
            out = self.dra_out(ctx, stored)
        return self.send_json(200, out)

    def dra_delete(self, ctx, name, opts):
        _, resource, ns = ctx
        pre = (opts.get("preconditions") if isinstance(opts, dict) else None) or {}
        with self.st.cond:
            key = (ns or "", name)
            old = self.st.dra[resource].get(key)
            if old is None:
                return self.send_json(404, not_found(DRA_GROUP, resource, name))
            for f, label in (("resourceVersion", "ResourceVersion"), ("uid", "UID")):
                if pre.get(f) and pre[f] != old["metadata"][f]:
                    return self.dra_conflict(resource, name, "Precondition failed: %s in "
                                             "precondition: %s, %s in object meta: %s" %
                                             (label, pre[f], label, old["metadata"][f]))
            del self.st.dra[resource][key]
            old = json.loads(json.dumps(old))
            old["metadata"]["resourceVersion"] = self.st.next_rv()
            self.st.dra_record("DELETED", resource, old)
            out = self.dra_out(ctx, old)
        return self.send_json(200, out)

    def objects(self, method, parts, body):
        """Custom objects under /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>]:
        POST creates (409 when present), GET reads, PUT replaces (404 when absent)."""
        try:
            obj = json.loads(body) if body else None
        except ValueError:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON"))
        with self.st.cond:
            if method == "POST" and len(parts) == 6:
                name = (obj or {}).get("metadata", {}).get("name", "")
                key = "/".join(parts + [name])
                if not name:
                    return self.send_json(422, status(422, "Invalid", "metadata.name missing"))
                if key in self.st.objects:
                    return self.send_json(409, status(409, "AlreadyExists",
                                                      '"%s" already exists' % name))
                obj["metadata"]["resourceVersion"] = self.st.next_rv()
                obj["metadata"]["uid"] = str(uuid.uuid4())
                self.st.objects[key] = obj
                return self.send_json(201, obj)
            key = "/".join(parts)
            if len(parts) != 7 or key not in self.st.objects:
                return self.send_json(404, not_found(parts[1], parts[5], parts[-1]))
            if method == "GET":
                return self.send_json(200, self.st.objects[key])
            if method == "PUT":
                obj["metadata"]["resourceVersion"] = self.st.next_rv()
                self.st.objects[key] = obj
                return self.send_json(200, obj)
        return self.send_json(405, status(405, "MethodNotAllowed", method))

    def patch_node(self, name, body):
        """JSON merge patch of a node's labels and annotations (null deletes)."""
        try:
            patch = json.loads(body)
        except ValueError:
            return self.send_json(400, status(400, "BadRequest", "invalid JSON"))
        with self.st.cond:
            node = self.st.nodes.get(name)
            if not node:
                return self.send_json(404, not_found("", "nodes", name))
            for field in ("labels", "annotations"):
                for k, v in patch.get("metadata", {}).get(field, {}).items():
                    d = node["metadata"].setdefault(field, {})
                    if v is None:
                        d.pop(k, None)
                    else:
                        d[k] = v
            node["metadata"]["resourceVersion"] = self.st.next_rv()
            self.st.record("MODIFIED", node)
            out = json.loads(json.dumps(node))
        return self.send_json(200, out)

    def handle_any(self, method):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.st.cond:
            self.st.requests.append({"method": method, "path": self.path,
                                     "authorization": self.headers.get("Authorization"),
                                     "user_agent": self.headers.get("User-Agent"),
                                     "client_cn": self.client_cn()})
        if u.path.startswith("/_test/"):
            return self.control(method, u.path, q)
        if self.st.stall_s > 0 and not (q.get("watch") in ("true", "1")):
            time.sleep(self.st.stall_s)  # a hung API server: the client must not wait on it
        if not self.authorized():
            return
        parts = [unquote(p) for p in u.path.strip("/").split("/")]
        if self.st.forbid:
            return self.send_json(403, status(
                403, "Forbidden",
                'nodes is forbidden: User "system:serviceaccount:gpu:gpuslice" cannot get '
                'resource "nodes" in API group "" at the cluster scope'))
        attrs = request_attributes(method, parts, q)
        if attrs and (attrs[0], attrs[1], attrs[2]) in self.st.denied:
            return self.send_json(403, forbidden(*attrs))
        if parts[:1] == ["apis"] and len(parts) >= 2 and parts[1] in self.st.missing_groups:
            # kube-apiserver's NotFound handler for a path nobody serves: plain text
            body = b"404 page not found\n"
            self.send_response(404)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if parts[:2] == ["apis", DRA_GROUP]:
            return self.dra(method, parts, q, body)
        if parts[:1] == ["apis"] and len(parts) >= 6 and parts[3] == "namespaces":
            return self.objects(method, parts, body)
        if method == "PATCH" and parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            with self.st.cond:
                failing = self.st.fail_patches
                self.st.failed_patches += failing
            if failing:
                return self.send_json(500, status(500, "InternalError",
                                                  "etcdserver: leader changed"))
            return self.patch_node(parts[3], body)
        if method == "GET" and parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            with self.st.cond:
                node = self.st.nodes.get(parts[3])
                node = json.loads(json.dumps(node)) if node else None
            if not node:
                return self.send_json(404, not_found("", "nodes", parts[3]))
            return self.send_json(200, node)
        if method == "GET" and parts == ["api", "v1", "nodes"]:
            sel = q.get("fieldSelector", "")
            name = sel[len("metadata.name="):] if sel.startswith("metadata.name=") else None
            if q.get("watch") in ("true", "1"):
                return self.watch(name, q)
            with self.st.cond:
                items = [json.loads(json.dumps(n)) for k, n in sorted(self.st.nodes.items())
                         if name is None or k == name]
                rv = str(self.st.rv)
            return self.send_json(200, {"kind": "NodeList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": rv}, "items": items})
        if (method == "POST" and len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"]
                and parts[4] == "events"):
            try:
                ev = json.loads(body)
            except ValueError:
                return self.send_json(400, status(400, "BadRequest", "invalid JSON"))
            refused = validate_event(ev, parts[3])
            if refused:
                return self.send_json(*refused)
            with self.st.cond:
                name = ev.get("metadata", {}).get("name")
                if any(e["metadata"].get("name") == name and e["metadata"]["namespace"] == parts[3]
                       for e in self.st.events):
                    return self.send_json(409, status(
                        409, "AlreadyExists", 'events "%s" already exists' % name,
                        {"name": name, "kind": "events"}))
                failing = self.st.fail_events > 0
                code = self.st.fail_events_code
                if failing:
                    self.st.fail_events -= 1
                    self.st.failed_events += 1
                if not failing or self.st.fail_events_store:
                    ev.setdefault("metadata", {})["resourceVersion"] = self.st.next_rv()
                    ev["metadata"]["namespace"] = parts[3]
                    self.st.events.append(ev)
            if failing:
                return self.send_json(code, status(code, "InternalError" if code >= 500
                                                   else "Forbidden" if code == 403 else "Failure",
                                                   "injected failure %d of an Event POST" % code))
            return self.send_json(201, ev)
        self.send_json(404, status(404, "NotFound", "the server could not find the "
                                                    "requested resource"))

    def send_chunk(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, name, q):
        st = self.st

        def added():
            return [json.loads(json.dumps(n)) for k, n in sorted(st.nodes.items())
                    if name is None or k == name]

        def events(since):
            return [(r, t, o if t != "BOOKMARK" and (name is None or o["metadata"]["name"] == name)
                     else None) for r, t, o in st.history if r > since]

        def bookmark(rv):
            return {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}
        return self.serve_watch(q, added, events, bookmark)

    def serve_watch(self, q, added, events, bookmark):
        """A chunked watch, for nodes and the DRA resources alike: every object of added() as
        ADDED (no resourceVersion) or the events after resourceVersion (410 once compacted),
        then events(since) as they come — [(rv, type, object to send or None)], called under
        the lock — with bookmarks (bookmark(rv)) when asked for, until timeoutSeconds."""
        st = self.st
        rv_text = q.get("resourceVersion")
        deadline = time.monotonic() + float(q.get("timeoutSeconds", "1800"))
        bookmarks = q.get("allowWatchBookmarks") == "true"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        with st.cond:
            st.watches_open += 1
            st.cond.notify_all()
            gen = st.generation
            pending = []
            if rv_text in (None, "", "0"):
                since = st.rv
                pending = [("ADDED", o) for o in added()]
            else:
                since = int(rv_text)
                if since < st.compacted_rv or st.always_gone:
                    pending = [("ERROR", status(
                        410, "Expired", "too old resource version: %d (%d)" %
                        (since, st.compacted_rv)))]
                    since = None
        try:
            for t, o in pending:
                self.send_chunk({"type": t, "object": o})
            if since is None:
                return self.end_chunks()
            while True:
                with st.cond:
                    while True:
                        if st.generation != gen or self.server.down:
                            return self.abort()
                        fresh = events(since)
                        if fresh or time.monotonic() >= deadline:
                            break
                        st.cond.wait(0.2)
                    if not fresh:
                        return self.end_chunks()
                    since = max(r for r, _, _ in fresh)
                for r, t, o in fresh:
                    if t == "BOOKMARK":
                        if bookmarks:
                            self.send_chunk({"type": "BOOKMARK", "object": bookmark(r)})
                    elif o is not None:
                        self.send_chunk({"type": t, "object": o})
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with st.cond:
                st.watches_open -= 1
                st.cond.notify_all()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def abort(self):
        # A dropped connection: no terminating chunk, the client sees a broken transfer.
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def control(self, method, path, q):
        st = self.st
        cmd = path[len("/_test/"):]
        node = q.get("node", self.server.default_node)
        if cmd == "label" and method == "POST":
            value = None if q.get("delete") else q.get("value", "")
            rv = st.set_label(node, q["key"], value, quiet=q.get("quiet") == "1")
            return self.send_json(200, {"resourceVersion": rv})
        if cmd == "delete-node" and method == "POST":
            st.delete_node(node)
        elif cmd == "compact" and method == "POST":
            st.compact()
        elif cmd == "drop" and method == "POST":
            st.drop_watches()
        elif cmd == "bookmark" and method == "POST":
            st.bookmark()
        elif cmd == "stall" and method == "POST":
            st.stall_s = float(q.get("seconds", "0"))
        elif cmd == "always-gone" and method == "POST":
            st.always_gone = q.get("on", "1") == "1"
        elif cmd == "fail-patches" and method == "POST":
            with st.cond:
                st.fail_patches = q.get("on", "1") == "1"
        elif cmd == "fail-events" and method == "POST":  # ?count=N[&code=503][&store=1]
            with st.cond:
                st.fail_events = int(q.get("count", "1"))
                st.fail_events_code = int(q.get("code", "503"))
                st.fail_events_store = q.get("store") == "1"
        elif cmd == "forbid" and method == "POST":
            st.forbid = q.get("on", "1") == "1"
        elif cmd == "deny" and method == "POST":  # ?verb=&group=&resource=, or ?clear=1
            with st.cond:
                if q.get("clear"):
                    st.denied.clear()
                else:
                    st.denied.add((q["verb"], q.get("group", ""), q["resource"]))
        elif cmd == "no-group" and method == "POST":  # ?group=, or ?clear=1
            with st.cond:
                if q.get("clear"):
                    st.missing_groups.clear()
                else:
                    st.missing_groups.add(q["group"])
        elif cmd == "dra-versions" and method == "POST":  # ?served=v1beta2,v1beta1 ("": none)
            served = [v for v in q.get("served", "").split(",") if v]
            if any(v not in DRA_VERSIONS for v in served):
                return self.send_json(400, status(400, "BadRequest", "unknown version"))
            with st.cond:
                st.dra_versions = served
        elif cmd == "dra" and method == "GET":  # every DRA object, stored (v1) shape
            with st.cond:
                return self.send_json(200, {r: [o for _, o in sorted(objs.items())]
                                            for r, objs in st.dra.items()})
        elif cmd == "down" and method == "POST":
            self.server.owner.down()
        elif cmd == "up" and method == "POST":
            self.server.owner.up()
        elif cmd == "objects" and method == "GET":
            with st.cond:
                return self.send_json(200, {"items": st.objects})
        elif cmd == "node" and method == "GET":
            with st.cond:
                return self.send_json(200, st.nodes.get(node) or {})
        elif cmd == "events" and method == "GET":
            with st.cond:
                return self.send_json(200, {"items": list(st.events)})
        elif cmd == "requests" and method == "GET":
            with st.cond:
                return self.send_json(200, {"items": list(st.requests)})
        elif cmd == "stats" and method == "GET":
            with st.cond:
                return self.send_json(200, {"rv": str(st.rv), "watches_open": st.watches_open,
                                            "failed_patches": st.failed_patches,
                                            "failed_events": st.failed_events,
                                            "compacted_rv": st.compacted_rv,
                                            "down": self.server.owner.is_down})
        else:
            return self.send_json(404, status(404, "NotFound", "unknown test endpoint"))
        self.send_json(200, {})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FakeApiServer:
    def __init__(self, nodes, token=None, token_file=None, verbose=False, tls=None,
                 dra_versions=DRA_VERSIONS):
        """tls: None (HTTP) or (cert file, key file, client CA file or None); with a
        client CA, clients must present a certificate it signed. dra_versions: the
        resource.k8s.io versions served (() = DRA off)."""
        self.ssl = None
        if tls:
            self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ssl.load_cert_chain(tls[0], tls[1])
            if tls[2]:
                self.ssl.load_verify_locations(tls[2])
                self.ssl.verify_mode = ssl.CERT_REQUIRED
        self.state = State(nodes, token, token_file)
        self.state.dra_versions = list(dra_versions)
        self.default_node = nodes[0]
        self.verbose = verbose
        self.is_down = False
        self.lock = threading.Lock()
        self.api = self.make(0, self.ssl)
        self.port = self.api.server_address[1]
        self.control = self.make(0)
        self.control_port = self.control.server_address[1]
        self.start(self.api)
        self.start(self.control)

    def make(self, port, ssl_context=None):
        s = Server(("127.0.0.1", port), Handler)
        if ssl_context:
            s.socket = ssl_context.wrap_socket(s.socket, server_side=True)
        s.state = self.state
        s.owner = self
        s.default_node = self.default_node
        s.verbose = self.verbose
        s.down = False
        return s

    @staticmethod
    def start(s):
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def down(self):
        """Stops accepting (connection refused) and breaks every open API connection."""
        with self.lock:
            if self.is_down:
                return
            self.is_down = True
            self.api.down = True
            self.state.drop_watches()
            self.api.shutdown()
            self.api.server_close()

    def up(self):
        with self.lock:
            if not self.is_down:
                return
            self.api = self.make(self.port, self.ssl)
            self.start(self.api)
            self.is_down = False


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--node", action="append", help="node name (repeatable); default node-1")
    ap.add_argument("--label", action="append", default=[], help="KEY=VALUE on the first node")
    ap.add_argument("--token", help="require this bearer token")
    ap.add_argument("--token-file", help="require the bearer token in this file (re-read)")
    ap.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="the certificate's key (PEM)")
    ap.add_argument("--client-ca", help="require client certificates signed by this CA")
    ap.add_argument("--dra-versions", default=",".join(DRA_VERSIONS),
                    help="resource.k8s.io versions served, comma-separated (\"\": DRA off)")
    ap.add_argument("--port-file", help="write {\"port\":..,\"control_port\":..} here")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    tls = (a.tls_cert, a.tls_key, a.client_ca) if a.tls_cert else None
    srv = FakeApiServer(a.node or ["node-1"], a.token, a.token_file, a.verbose, tls,
                        [v for v in a.dra_versions.split(",") if v])
    for kv in a.label:
        k, _, v = kv.partition("=")
        srv.state.set_label(srv.default_node, k, v)
    info = json.dumps({"port": srv.port, "control_port": srv.control_port})
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(info + "\n")
        os.rename(tmp, a.port_file)
    print("port=%d control_port=%d" % (srv.port, srv.control_port), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
