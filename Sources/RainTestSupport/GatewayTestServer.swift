import Foundation

/// The other end of the code senders' tests, real servers on loopback run by
/// `/usr/bin/python3`: an SMTP server (Debian `python3-aiosmtpd`) and an HTTPS server standing in
/// for an SMS gateway. Each records what it received as `N.json` in its directory, parsed on its
/// side (Python's `email` package for mail), so a test checks the message as a mail client reads it.
public final class GatewayTestServer: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: Int
    /// Where it records what it receives.
    public let directory: String
    private let process: TestProcess

    private init(port: Int, directory: String, process: TestProcess) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// What the SMTP server should do with a conversation.
    public enum SMTPMode: String, Sendable {
        /// Accept every message.
        case accept
        /// 550 to the recipient (a permanent refusal).
        case refuseRecipient = "refuse-rcpt"
        /// 450 to the recipient (a temporary refusal).
        case deferRecipient = "defer-rcpt"
        /// 554 after the data (refused once handed over).
        case refuseData = "refuse-data"
        /// Accept the connection and never say a word.
        case hangGreeting = "hang-greeting"
        /// Keep the message and never answer the end of its data.
        case hangAfterData = "hang-after-data"
        /// Keep the message and close the connection instead of answering.
        case dropAfterData = "drop-after-data"
        /// Close the connection when the data starts.
        case dropBeforeData = "drop-before-data"
    }

    /// How the SMTP server protects connections.
    public enum SMTPTLS: String, Sendable {
        case none
        /// STARTTLS, required before anything else.
        case startTLS = "starttls"
        /// TLS from the first byte.
        case implicit = "tls"
    }

    /// Starts an SMTP server in `directory` (which must exist).
    /// - Parameters:
    ///   - certificates: the server's certificate (required for TLS).
    ///   - credentials: the one user and password it accepts (AUTH required), or nil.
    public static func smtp(
        in directory: String, mode: SMTPMode = .accept, tls: SMTPTLS = .none, certificates: TestCertificates? = nil,
        credentials: (user: String, password: String)? = nil
    ) async throws -> GatewayTestServer {
        var options = ["mode": mode.rawValue, "tls": tls.rawValue]
        if let certificates {
            options["cert"] = certificates.serverCertificatePath
            options["key"] = certificates.serverKeyPath
        }
        if let credentials { options["auth"] = "\(credentials.user):\(credentials.password)" }
        return try await start(script: smtpScript, name: "smtp", options: options, directory: directory)
    }

    /// Starts an HTTPS server in `directory` that answers `mode` (`accept`, `status-NNN`, `hang`,
    /// `drop`), checks the webhook signature with the secret in `secretFile` and the basic
    /// credentials `basic` (`account:token`) when given (401 when they do not match).
    public static func https(
        in directory: String, mode: String = "accept", certificates: TestCertificates, secretFile: String? = nil,
        basic: String? = nil
    ) async throws -> GatewayTestServer {
        var options = [
            "mode": mode, "cert": certificates.serverCertificatePath, "key": certificates.serverKeyPath,
        ]
        if let secretFile { options["secret"] = secretFile }
        if let basic { options["basic"] = basic }
        return try await start(script: httpsScript, name: "https", options: options, directory: directory)
    }

    private static func start(script: String, name: String, options: [String: String], directory: String)
        async throws -> GatewayTestServer
    {
        let records = "\(directory)/received"
        try FileManager.default.createDirectory(atPath: records, withIntermediateDirectories: true)
        let path = "\(directory)/\(name)_server.py"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let out = "\(directory)/\(name).out"
        let err = "\(directory)/\(name).err"
        var arguments = [path, "dir=\(records)"]
        for (key, value) in options.sorted(by: { $0.key < $1.key }) { arguments.append("\(key)=\(value)") }
        let process = try TestProcess("/usr/bin/python3", arguments, stdout: .file(out), stderr: .file(err))
        // Readiness, not a fixed wait: the script prints its port once it listens.
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }),
                let port = Int(line.dropFirst(5))
            {
                return GatewayTestServer(port: port, directory: records, process: process)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        await process.stop(grace: .seconds(1))
        let errors = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        throw HarnessError("the test \(name) server did not start: \(errors)")
    }

    /// Stops the server.
    public func stop() async { await process.stop(grace: .seconds(2)) }

    /// A message the SMTP server accepted.
    public struct Mail: Decodable, Sendable {
        public struct Part: Decodable, Sendable {
            public var type: String
            public var charset: String?
            public var text: String
        }
        public var mailFrom: String
        public var rcptTos: [String]
        /// The user that authenticated, if any.
        public var login: String?
        public var headers: [String: String]
        public var contentType: String
        /// The leaf parts, decoded.
        public var parts: [Part]
    }

    /// A request the HTTPS server received.
    public struct Request: Decodable, Sendable {
        public var path: String
        public var headers: [String: String]
        public var body: String
        /// Whether the webhook signature checked out (nil: no secret given).
        public var signatureValid: Bool?
        /// Whether the basic credentials checked out (nil: none given).
        public var basicValid: Bool?
    }

    /// Everything recorded so far, in order.
    public func records<T: Decodable>(_ type: T.Type = T.self) throws -> [T] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
        let sorted = names.sorted { (Int($0.dropLast(5)) ?? 0) < (Int($1.dropLast(5)) ?? 0) }
        return try sorted.map { name in
            try JSONDecoder().decode(T.self, from: Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")))
        }
    }

    /// The messages the SMTP server accepted.
    public func mails() throws -> [Mail] { try records() }

    /// The requests the HTTPS server received.
    public func requests() throws -> [Request] { try records() }

    static let smtpScript = #"""
        # A test SMTP server (aiosmtpd) on loopback: records each message it accepts as N.json (envelope,
        # headers and decoded parts, parsed by Python's email package) and N.eml in the directory; prints
        # "PORT n" once listening. Modes: accept, refuse-rcpt (550), defer-rcpt (450), refuse-data (554
        # after the data), hang-greeting (never says a word), hang-after-data (keeps the message, never
        # answers its end), drop-after-data (keeps it, closes the connection), drop-before-data (closes it
        # at the recipient).
        # (No line starts with "import": scripts/lint reads such a line in a Swift file as a Swift import.)
        from importlib import import_module as _load
        asyncio, email, json, os, ssl, sys = (_load(m) for m in ("asyncio", "email", "json", "os", "ssl", "sys"))
        _load("email.policy")

        from aiosmtpd.smtp import SMTP, AuthResult

        opts = dict(a.split("=", 1) for a in sys.argv[1:])
        directory, mode, tls = opts["dir"], opts.get("mode", "accept"), opts.get("tls", "none")
        user, password = (opts["auth"].split(":", 1) if "auth" in opts else (None, None))
        counter = [0]


        def record(envelope, login):
            counter[0] += 1
            n = counter[0]
            raw = envelope.original_content or envelope.content
            msg = email.message_from_bytes(raw, policy=email.policy.default)
            parts = []
            for part in msg.walk():
                if part.get_content_maintype() == "multipart":
                    continue
                parts.append({"type": part.get_content_type(), "charset": part.get_content_charset(), "text": part.get_content()})
            doc = {"mailFrom": envelope.mail_from, "rcptTos": envelope.rcpt_tos, "login": login,
                   "headers": {k: str(v) for k, v in msg.items()}, "contentType": msg.get_content_type(), "parts": parts}
            with open(os.path.join(directory, f"{n}.eml.tmp"), "wb") as f:
                f.write(raw)
            with open(os.path.join(directory, f"{n}.json.tmp"), "w") as f:
                json.dump(doc, f)
            os.rename(os.path.join(directory, f"{n}.eml.tmp"), os.path.join(directory, f"{n}.eml"))
            os.rename(os.path.join(directory, f"{n}.json.tmp"), os.path.join(directory, f"{n}.json"))


        class Handler:
            async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
                if mode == "drop-before-data":
                    server.transport.abort()
                    await asyncio.sleep(3600)
                if mode == "refuse-rcpt":
                    return "550 5.1.1 no such user"
                if mode == "defer-rcpt":
                    return "450 4.2.1 mailbox busy, try later"
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server, session, envelope):
                login = session.auth_data.decode() if isinstance(session.auth_data, bytes) else session.auth_data
                if mode == "refuse-data":
                    return "554 5.7.1 message refused"
                record(envelope, login)
                if mode == "hang-after-data":
                    await asyncio.sleep(3600)
                if mode == "drop-after-data":
                    server.transport.abort()
                    await asyncio.sleep(3600)
                return "250 2.0.0 queued"


        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = auth_data.login.decode() == user and auth_data.password.decode() == password
            return AuthResult(success=ok, handled=False, auth_data=auth_data.login if ok else None)


        def context():
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(opts["cert"], opts["key"])
            return ctx


        async def main():
            loop = asyncio.get_running_loop()
            if mode == "hang-greeting":
                async def silent(reader, writer):
                    await asyncio.sleep(3600)
                server = await asyncio.start_server(silent, "127.0.0.1", 0)
            else:
                def factory():
                    kwargs = dict(hostname="smtp.test", auth_require_tls=(tls == "starttls"))
                    if user is not None:
                        kwargs.update(authenticator=authenticator, auth_required=True)
                    if tls == "starttls":
                        kwargs.update(tls_context=context(), require_starttls=True)
                    return SMTP(Handler(), **kwargs)
                server = await loop.create_server(factory, "127.0.0.1", 0, ssl=context() if tls == "tls" else None)
            port = server.sockets[0].getsockname()[1]
            print(f"PORT {port}", flush=True)
            await asyncio.Event().wait()


        asyncio.run(main())
        """#

    static let httpsScript = #"""
        # A test HTTPS server on loopback standing in for an SMS gateway: records each request as N.json
        # (path, headers, body, whether the webhook signature or the basic credentials check out) and
        # prints "PORT n" once listening. Modes: accept (200), status-NNN (answers NNN), hang (never
        # answers), drop (closes without answering).
        # (No line starts with "import": scripts/lint reads such a line in a Swift file as a Swift import.)
        from importlib import import_module as _load
        base64, hashlib, hmac, http, json, os, ssl, sys, threading, time = (
            _load(m) for m in ("base64", "hashlib", "hmac", "http", "json", "os", "ssl", "sys", "threading", "time"))
        _load("http.server")

        opts = dict(a.split("=", 1) for a in sys.argv[1:])
        directory, mode = opts["dir"], opts.get("mode", "accept")
        secret = open(opts["secret"], "rb").read().strip() if "secret" in opts else None
        basic = opts.get("basic")
        lock = threading.Lock()
        counter = [0]


        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                signature_ok = None
                if secret is not None:
                    ts = self.headers.get("X-Rain-Timestamp", "")
                    expected = "v1=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
                    signature_ok = hmac.compare_digest(expected, self.headers.get("X-Rain-Signature", ""))
                basic_ok = None
                if basic is not None:
                    basic_ok = self.headers.get("Authorization", "") == "Basic " + base64.b64encode(basic.encode()).decode()
                with lock:
                    counter[0] += 1
                    n = counter[0]
                doc = {"path": self.path, "headers": {k: v for k, v in self.headers.items()}, "body": body.decode(),
                       "signatureValid": signature_ok, "basicValid": basic_ok}
                with open(os.path.join(directory, f"{n}.json.tmp"), "w") as f:
                    json.dump(doc, f)
                os.rename(os.path.join(directory, f"{n}.json.tmp"), os.path.join(directory, f"{n}.json"))
                if mode == "hang":
                    time.sleep(3600)
                if mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                status = 200
                if mode.startswith("status-"):
                    status = int(mode[7:])
                elif signature_ok is False or basic_ok is False:
                    status = 401
                answer = b'{"ok":true}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)


        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(opts["cert"], opts["key"])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        print(f"PORT {server.server_address[1]}", flush=True)
        server.serve_forever()
        """#
}
