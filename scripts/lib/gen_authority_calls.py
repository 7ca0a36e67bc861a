"""Writes the Swift code of `service Authority` (proto/authority.proto), for gen-swift-messages.py.

Each rpc's `(authority)` option (proto/authority_options.proto) says how it is called and served.
From the service block and those options it writes:
- RainAuthorityAPI: `AuthorityCalls`, the protocol `Authority` refines, with one requirement per rpc
  the `Authority` protocol serves: `func rpcName(_ request: Request, caller: AuthorityCaller) async
  throws(RainError) -> Response`, documented with the rpc's comment; and `RemoteAuthority`'s call of
  each (encode, call with the rpc's kind and proof, decode and check complete).
- RainAuthorityServer: the route of every rpc, in the order of the service block, with its policy:
  the requirement run in a task, or the handler `AuthorityService` gives (`OwnHandlers`).
- RainTestSupport: `ForwardingAuthority`, whose every call goes to another authority unless the
  conforming type implements it (the tests' authorities that fail, hold or count some calls).
"""

import textwrap

from google.protobuf import descriptor_pool

SERVICE = "Authority"
OPTION = "rain.wallet.v1.authority"

KINDS = {1: "read", 2: "send", 3: "refresh"}
HANDLER_AUTHORITY, HANDLER_SERVICE, HANDLER_CONNECTION = 0, 1, 2

# Why each kind of call can fail without an answer from the authority, for the remote calls' docs.
REMOTE_THROWS = {
    "read": "the authority's errors; RAIN_301 when it cannot be reached or does not answer within the read's bound.",
    "send": "the authority's errors; RAIN_301 when it cannot be reached; RAIN_501 `outcome_unknown` when the request "
            "left and no answer came.",
    "refresh": "the authority's errors; RAIN_301 when it cannot be reached or does not answer in time (safe to "
               "repeat within the refresh grace window).",
}


class Rpc:
    def __init__(self, method, comment, options, request, response, proven_field, g):
        self.rpc = method.name
        self.name = method.name[:1].lower() + method.name[1:]
        self.comment = g.clean_comment(comment)
        self.request = request
        self.response = response
        self.stream = method.server_streaming
        self.kind = KINDS[options.kind]
        self.needs_session = options.needs_session
        self.sensitive = options.sensitive
        self.handler = options.handler
        # What decides that the device proves its keys on the call's connection first.
        if self.needs_session or options.proven:
            self.proven = "true"
        elif proven_field:
            self.proven = f"!request.{proven_field}.isEmpty"
        else:
            self.proven = None

    @property
    def in_protocol(self):
        return self.handler != HANDLER_CONNECTION

    @property
    def policy(self):
        """The route's `RoutePolicy`: a read only when it has no effect and exposes nothing."""
        kind = "read" if self.kind == "read" and not self.sensitive else "send"
        args = []
        if self.needs_session:
            args.append("needsSession: true")
        if self.sensitive:
            args.append("isSensitive: true")
        return f".{kind}({', '.join(args)})"

    def signature(self, prefix, indent, brace=""):
        """The requirement's declaration after `prefix` (`func`, `public func`), wrapped as swift
        format wraps it; the lines, the last without `brace` (what will follow it on its line)."""
        head = f"{prefix} {self.name}(_ request: {self.request}, caller: AuthorityCaller)"
        tail = f"async throws(RainError) -> {self.response}"
        if len(indent) + len(head) + 1 + len(tail) + len(brace) <= LINE:
            return [f"{indent}{head} {tail}"]
        if len(indent) + len(head) + len(" async throws(RainError)") <= LINE:
            return [f"{indent}{head} async throws(RainError)", f"{indent}    -> {self.response}"]
        return [f"{indent}{prefix} {self.name}(", f"{indent}    _ request: {self.request}, caller: AuthorityCaller",
                f"{indent}) {tail}"]


LINE = 130


def function(rpc, prefix, indent, body):
    """A function with the requirement's signature and a one-statement `body`."""
    lines = rpc.signature(prefix, indent, brace=" {")
    if len(lines) == 2:
        lines.append(f"{indent}{{")
    else:
        lines[-1] += " {"
    lines += [f"{indent}    {line}" for line in body]
    lines.append(f"{indent}}}")
    return "".join(line + "\n" for line in lines)


def wrap(first, args, indent, last=""):
    """`first(args)` on one line when it fits, else `first(` then the arguments packed greedily on
    lines of `indent`, the last one closing."""
    one = f"{first}{', '.join(args)}){last}"
    if len(indent) + len(one) <= LINE:
        return [one]
    lines, current = [first], ""
    for i, arg in enumerate(args):
        piece = arg + (", " if i + 1 < len(args) else f"){last}")
        if current and len(indent) + 4 + len(current) + len(piece.rstrip()) > LINE:
            lines.append("    " + current.rstrip())
            current = ""
        current += piece
    lines.append("    " + current)
    return lines


def pack(args, indent):
    """Arguments packed greedily on lines of `indent`, each line ending with a comma."""
    lines, current = [], ""
    for arg in args:
        piece = arg + ","
        if current and len(indent) + len(current) + 1 + len(piece) > LINE:
            lines.append(current)
            current = ""
        current = f"{current} {piece}" if current else piece
    return lines + [current]


def options_reader(fds):
    """Reads the `(authority)` option of a method, or None."""
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:
        pool.Add(file)
    extension = pool.FindExtensionByName(OPTION)
    method_options = pool.FindMessageTypeByName("google.protobuf.MethodOptions")
    try:
        from google.protobuf.message_factory import GetMessageClass
        options_class = GetMessageClass(method_options)
    except ImportError:
        from google.protobuf.message_factory import MessageFactory
        options_class = MessageFactory(pool).GetPrototype(method_options)

    def read(method):
        # The option is an extension this Python does not know: read it again with the pool's classes.
        options = options_class.FromString(method.options.SerializeToString())
        return options.Extensions[extension] if options.HasExtension(extension) else None

    return read


def rpcs_of(fds, files, types, g):
    read = options_reader(fds)
    messages = {f"{file.package}.{m.name}": m for file in fds.file for m in file.message_type}
    rpcs = []
    for file in files:
        comments = g.comments_of(file)
        for i, service in enumerate(file.service):
            if service.name != SERVICE:
                continue
            for j, method in enumerate(service.method):
                where = f"{file.package}.{service.name}.{method.name}"
                options = read(method)
                if options is None or options.kind not in KINDS:
                    raise g.Unsupported(f"{where}: an rpc of service {SERVICE} without `option (authority)` and its kind")
                if method.server_streaming and options.handler != HANDLER_CONNECTION:
                    raise g.Unsupported(f"{where}: a stream the Authority protocol serves (mark it HANDLER_CONNECTION)")
                proven_field = None
                if options.proven_if:
                    full = method.input_type.lstrip(".")
                    fields = {f.name: f for f in messages[full].field}
                    field = fields.get(options.proven_if)
                    if field is None or field.type not in (g.FD.TYPE_STRING, g.FD.TYPE_BYTES):
                        raise g.Unsupported(f"{where}: proven_if {options.proven_if!r}, not a string or bytes field")
                    proven_field = g.SWIFT_NAMES.get(f"{full}.{field.name}") or g.swift_name(field)
                rpcs.append(Rpc(method, comments.get((6, i, 2, j), ""), options,
                                g.swift_type_of(method.input_type.lstrip("."), types),
                                g.swift_type_of(method.output_type.lstrip("."), types), proven_field, g))
    return rpcs


HEADER = "// GENERATED by scripts/gen-proto from service Authority of proto/authority.proto. Do not edit.\n"


def api_file(rpcs, g):
    out = [HEADER, "import RainCore\nimport RainWire\n\n"]
    out.append(g.doc([
        "The calls of `service Authority` (proto/authority.proto) that the `Authority` protocol serves, one",
        "requirement per rpc: its request message in, its response message out, and who calls. `Authority`",
        "refines it; `RemoteAuthority` sends each call as it is, and `AuthorityService` routes each to it.",
        "Every requirement throws `RainError` only.",
    ], ""))
    out.append("public protocol AuthorityCalls: Sendable {\n")
    served = [r for r in rpcs if r.in_protocol]
    for i, rpc in enumerate(served):
        out.append("\n" if i else "")
        out.append(g.doc(rpc.comment or [f"`{rpc.rpc}`."], "    "))
        out.append("".join(line + "\n" for line in rpc.signature("func", "    ")))
    out.append("}\n\n")
    out.append("// `RemoteAuthority`'s call of each requirement: the request as it is (the caller is not sent: what\n")
    out.append("// counts is what the connection proved), bounded by the rpc's kind, the answer checked complete.\n")
    out.append("extension RemoteAuthority {\n")
    for i, rpc in enumerate(served):
        out.append("\n" if i else "")
        throws = textwrap.wrap(f"- Throws: {REMOTE_THROWS[rpc.kind]}", width=100, subsequent_indent="  ")
        out.append(g.doc([f"`{rpc.rpc}` at the remote authority (see `AuthorityCalls.{rpc.name}`)."] + throws, "    "))
        args = [f"AuthorityMethod.{rpc.name}", "request", f"as: {rpc.response}.self", f"kind: .{rpc.kind}"]
        if rpc.proven:
            args.append(f"isProven: {rpc.proven}")
        body = wrap("try await call(", args, "        ")
        out.append(function(rpc, "public func", "    ", body))
    out.append("}\n")
    return fit("".join(out), g)


def server_file(rpcs, g):
    out = [HEADER, "import RainAuthorityAPI\nimport RainCore\nimport RainTransport\nimport RainWire\n\n"]
    out.append("extension AuthorityService {\n")
    own = [r for r in rpcs if r.handler != HANDLER_AUTHORITY]
    out.append(g.doc([
        "The route handlers the service gives itself: the rpcs it answers from the connection or its own",
        "state (`HANDLER_CONNECTION`), or decides on before the `Authority` protocol (`HANDLER_SERVICE`).",
    ], "    "))
    out.append("    struct OwnHandlers {\n")
    for i, rpc in enumerate(own):
        out.append("\n" if i else "")
        out.append(g.doc([f"`{rpc.rpc}`: {rpc.comment[0] if rpc.comment else ''}".rstrip()], "        "))
        out.append(f"        var {rpc.name}: RouteHandler<Call, {rpc.request}, {rpc.response}>\n")
    out.append("    }\n\n")
    out.append(g.doc([
        "One route per rpc of `service Authority`, in its order, with its policy: the `Authority` requirement",
        "run in a task with the call's caller, or the service's own handler.",
    ], "    "))
    out.append("    @RouteTableBuilder<Call>\n")
    out.append("    static func declaredRoutes(_ own: OwnHandlers) -> [AnyRoute<Call>] {\n")
    for rpc in rpcs:
        out.append("        Route(\n")
        head = [f"AuthorityMethod.{rpc.name}", f"{rpc.request}.self", f"{rpc.response}.self", f"policy: {rpc.policy}"]
        out.append("".join(f"            {line}\n" for line in pack(head, " " * 12)))
        if rpc.handler == HANDLER_AUTHORITY:
            # Every authority call goes through the read leases (`Call.leased`): its accounts
            # collected, and a change held until the leased readers acknowledged it.
            is_read = "true" if rpc.kind == "read" else "false"
            handler = [
                ".actor { (r, call) throws(RainError) in",
                f"    try await call.leased(isRead: {is_read}) {{ () async throws(RainError) in",
                f"        try await call.authority.{rpc.name}(r, caller: call.caller)",
                "    }",
                "})",
            ]
        else:
            handler = [f"own.{rpc.name})"]
        out.append("".join(f"            {line}\n" for line in handler))
    out.append("    }\n}\n")
    return fit("".join(out), g)


def forwarding_file(rpcs, g):
    out = [HEADER, "import RainAuthorityAPI\nimport RainCore\nimport RainWire\n\n"]
    out.append(g.doc([
        "An `Authority` made of another, for the tests' authorities that fail, hold or count calls: each call",
        "the conforming type does not implement itself goes through `intercept`, which by default passes it",
        "to `forwarded`. What is not a call of `service Authority` (the read freshness, the link) keeps",
        "`Authority`'s in-process defaults.",
    ], ""))
    out.append("package protocol ForwardingAuthority: Authority {\n")
    out.append("    /// Where the calls go.\n    var forwarded: any Authority { get }\n\n")
    out.append(g.doc([
        "Runs one call of `method` (an `AuthorityMethod`); `call` passes it on to `forwarded`.",
    ], "    "))
    out.append("    func intercept<Response>(_ method: String, _ call: () async throws(RainError) -> Response)\n")
    out.append("        async throws(RainError) -> Response\n}\n\n")
    out.append("extension ForwardingAuthority {\n")
    out.append("    /// Passes the call on.\n")
    out.append("    package func intercept<Response>(_ method: String, _ call: () async throws(RainError) -> Response)\n")
    out.append("        async throws(RainError) -> Response\n    {\n        try await call()\n    }\n")
    for rpc in (r for r in rpcs if r.in_protocol):
        out.append("\n")
        out.append(f"    /// Forwards `{rpc.rpc}` through `intercept`.\n")
        out.append(function(rpc, "package func", "    ", [
            f"try await intercept(AuthorityMethod.{rpc.name}) {{ () async throws(RainError) in",
            f"    try await forwarded.{rpc.name}(request, caller: caller)",
            "}",
        ]))
    out.append("}\n")
    return fit("".join(out), g)


def fit(text, g):
    too_long = [line for line in text.split("\n") if len(line) > LINE]
    if too_long:
        raise g.Unsupported(f"lines over {LINE} characters ({too_long[0].strip()[:60]}…) in the generated Authority code")
    return text


def generate(fds, files, types, g):
    """The three files: (RainAuthorityAPI's, RainAuthorityServer's, RainTestSupport's)."""
    rpcs = rpcs_of(fds, files, types, g)
    if not rpcs:
        raise g.Unsupported(f"no service {SERVICE}")
    return api_file(rpcs, g), server_file(rpcs, g), forwarding_file(rpcs, g)
