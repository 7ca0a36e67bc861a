import RainCore
import Testing

@Suite struct ContactNormalizationTests {
    @Test(arguments: [
        ("user@example.com", "user@example.com"),
        ("  User@Example.COM \n", "user@example.com"),
        ("a@b.co", "a@b.co"),
        ("first.last+tag@sub.example.co.uk", "first.last+tag@sub.example.co.uk"),
        (String(repeating: "a", count: 64) + "@example.com", String(repeating: "a", count: 64) + "@example.com"),
    ])
    func validEmails(raw: String, normalized: String) throws {
        #expect(try RainWalletContact.email(raw).normalized() == .email(normalized))
    }

    @Test(arguments: [
        "", "   ", "user", "user@", "@example.com", "user@example", "user@@example.com", "a@b@example.com",
        "us er@example.com", "user@exa mple.com", "user@example..com", "user@.example.com", "user@example.com.",
        String(repeating: "a", count: 65) + "@example.com",
        "a@" + String(repeating: "b", count: 250) + ".com",
        "user\u{0}@example.com",
    ])
    func invalidEmails(raw: String) {
        let error = #expect(throws: RainError.self) { try RainWalletContact.email(raw).normalized() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "invalid_email")
    }

    @Test func emailOf254CharactersIsTheLimit() throws {
        let domain = String(repeating: "d", count: 254 - 10 - 1 - 4) + ".com"
        let ok = String(repeating: "l", count: 10) + "@" + domain
        #expect(ok.count == 254)
        #expect(throws: Never.self) { try RainWalletContact.email(ok).normalized() }
        let error = #expect(throws: RainError.self) { try RainWalletContact.email("l" + ok).normalized() }
        #expect(error?.code == .invalidArgument)
    }

    @Test(arguments: [
        ("+15551234567", "+15551234567"),
        ("  +1 555 123 4567 ", "+15551234567"),
        ("+1-555-123-4567", "+15551234567"),
        ("+1 (555) 123.4567", "+15551234567"),
        ("+44 20 7946 0958", "+442079460958"),
        ("+12345678", "+12345678"),
        ("+123456789012345", "+123456789012345"),
    ])
    func validPhones(raw: String, normalized: String) throws {
        #expect(try RainWalletContact.phone(raw).normalized() == .phone(normalized))
    }

    @Test(arguments: [
        "+44 (0)20 7946 0958", "+44(0)2079460958", "15551234567", "+0 555 123 4567", "+1234567",
        "+1234567890123456", "+1 555 CALL NOW", "", "+", "++15551234567", "+1 555\u{0}1234567", "+1/555/1234567",
    ])
    func invalidPhones(raw: String) {
        let error = #expect(throws: RainError.self) { try RainWalletContact.phone(raw).normalized() }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.reason == "invalid_phone")
    }
}

@Suite struct RainErrorTests {
    @Test func comparesByCode() {
        let e = RainError(.invalidLoginCode, "wrong", details: .init(attemptsRemaining: 2))
        #expect(e == .invalidLoginCode)
        #expect(e != .sessionExpired)
        #expect(e.code.description == "RAIN_203")
    }

    @Test func keepsUnknownCodes() {
        let e = RainError(RainError.Code(999), "future")
        #expect(e.code.rawValue == 999)
        #expect(e.code.description == "RAIN_999")
    }

    @Test(
        arguments: [
            (RainError.notInitialized, 101), (.invalidArgument, 102), (.sessionExpired, 201), (.unauthorized, 202),
            (.invalidLoginCode, 203), (.network, 301), (.refused, 302), (.userCancelled, 401), (.unavailable, 404),
            (.provider, 501), (.internalError, 502),
        ] as [(RainError, UInt32)])
    func numbersMatchDesign(error: RainError, number: UInt32) {
        #expect(error.code.rawValue == number)
    }
}

@Suite struct ProfileNameTests {
    @Test(arguments: ["default", "a", "my-app", "0app", String(repeating: "a", count: 64)])
    func valid(name: String) {
        #expect(throws: Never.self) { try ProfileName.validate(name) }
    }

    @Test(arguments: ["", "-a", "My", "a_b", "a/b", "..", "a.b", String(repeating: "a", count: 65), "é"])
    func invalid(name: String) {
        let error = #expect(throws: RainError.self) { try ProfileName.validate(name) }
        #expect(error?.code == .invalidArgument)
    }
}

@Suite struct SessionPolicyTests {
    @Test func thresholdsClampToHalfTheLifetime() {
        let p = RainWalletSessionPolicy.default
        #expect(p.effectiveRefreshBuffer(lifetime: .seconds(900)) == .seconds(60))
        #expect(p.effectiveRefreshBuffer(lifetime: .seconds(60)) == .seconds(30))
        #expect(p.effectiveActiveThreshold(lifetime: .seconds(900)) == .seconds(30))
        #expect(p.effectiveActiveThreshold(lifetime: .seconds(20)) == .seconds(10))
    }

    @Test func defaultsMatchDesign() {
        let p = RainWalletSessionPolicy.default
        #expect(p.transientRetries == 2)
        #expect(p.retryInitialDelay == .milliseconds(500))
        #expect(p.retryMaxDelay == .seconds(4))
        #expect(p.restoreTimeout == .seconds(5))
        #expect(p.isAutoRefreshEnabled)
    }
}
