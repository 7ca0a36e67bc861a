import RainCore
import RainPasskeyDomain
import Testing

@Suite struct PasskeyDomainTests {
    @Test(arguments: [
        ("example.com", "example.com"),
        (" Example.COM ", "example.com"),
        ("example.co.uk", "example.co.uk"),
        ("foo.github.io", "foo.github.io"),
        ("login.example.com", "login.example.com"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
    ])
    func accepted(raw: String, normalized: String) throws {
        #expect(try PasskeyDomain.validate(raw) == normalized)
    }

    @Test(arguments: [
        "https://example.com",  // scheme
        "example.com:443",  // port
        "example.com/login",  // path
        "localhost",
        "app.localhost",
        "com",  // single label / public suffix
        "co.uk",  // bare public suffix
        "github.io",  // bare (private) public suffix
        "foo.internal",  // unknown suffix (implicit * rule)
        "foo.notarealtld",
        "127.0.0.1",
        "",
        "example..com",
        ".example.com",
        "exa mple.com",
        "-bad.example.com",
        "user@example.com",
    ])
    func refused(raw: String) {
        let error = #expect(throws: RainError.self) { try PasskeyDomain.validate(raw) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == "passkeyDomain")
    }
}
