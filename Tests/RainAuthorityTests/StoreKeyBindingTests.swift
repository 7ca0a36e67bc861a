import Foundation
import RainCore
import RainCrypto
import RainStore
import RainTestSupport
import Testing

@testable import RainAuthority

/// The store's master-key check (`StoreKeyBinding`), on SQLite and PostgreSQL.
@Suite("Store key check")
struct StoreKeyBindingTests {
    static let kinds = StoreKind.allCases
    static let logger = Logger(label: "test.store-key", sink: CapturingLogSink())

    static func keys(_ byte: UInt8) throws -> AuthorityKeys {
        try AuthorityKeys(masterKey: SymmetricKey(bytes: Array(repeating: byte, count: 32)))
    }

    @Test("the check value is HMAC-SHA256 of its label under the master key: not the key, and another key's differs")
    func checkValue() throws {
        let master = SymmetricKey(bytes: Array(0..<32))
        let keys = try AuthorityKeys(masterKey: master)
        #expect(keys.storeKeyCheck == HMACSHA256.authenticate(Array("rain/store-key-check/v1".utf8), key: master))
        #expect(keys.storeKeyCheck != Array(0..<32))
        #expect(keys.storeKeyCheck.count == 32)
        #expect(try Self.keys(1).storeKeyCheck != keys.storeKeyCheck)
    }

    @Test(
        "an empty store records the first key's check; that key starts again; another key is refused with RAIN_102 master_key_mismatch naming both key ids, and the recorded check stays",
        arguments: kinds)
    func emptyStoreRecordsThenRefusesAnotherKey(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let first = try Self.keys(1)
            #expect(try await f.store.keyCheck() == nil)
            #expect(try await f.store.holdsKeyedData() == false)
            try await StoreKeyBinding.check(first, store: f.store, keyFile: "/state", logger: Self.logger)
            #expect(try await f.store.keyCheck() == StoreKeyCheck(keyID: first.masterKeyID, value: first.storeKeyCheck))
            #expect(try await f.store.holdsKeyedData())
            try await StoreKeyBinding.check(first, store: f.store, keyFile: "/state", logger: Self.logger)

            let second = try Self.keys(2)
            let error = try #require(
                await rainError {
                    try await StoreKeyBinding.check(second, store: f.store, keyFile: "/state", logger: Self.logger)
                })
            #expect(error.code == .invalidArgument)
            #expect(error.details.reason == "master_key_mismatch")
            #expect(error.message.contains(first.masterKeyID) && error.message.contains(second.masterKeyID))
            #expect(try await f.store.keyCheck()?.keyID == first.masterKeyID)
        }
    }

    @Test(
        "a store with accounts but no check (from a build without it) adopts the check of the key it starts with; another key is refused afterwards",
        arguments: kinds)
    func migratedStoreAdopts(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            _ = try await f.storeLogin()
            let current = try Self.keys(3)
            let proposed = StoreKeyCheck(keyID: current.masterKeyID, value: current.storeKeyCheck)
            #expect(try await f.store.recordKeyCheck(proposed, at: Date()) == .adopted)
            #expect(try await f.store.recordKeyCheck(proposed, at: Date()) == .existing(proposed))
            let error = try #require(
                await rainError {
                    try await StoreKeyBinding.check(try Self.keys(4), store: f.store, keyFile: "/s", logger: Self.logger)
                })
            #expect(error.details.reason == "master_key_mismatch")
        }
    }

    @Test(
        "without authority.key, a store holding data is refused with RAIN_102 master_key_missing and no key file is made; an empty store gets a new key, recorded",
        arguments: kinds)
    func missingKeyFile(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let made = try await StoreKeyBinding.keys(stateDirectory: directory, store: f.store, logger: Self.logger)
            #expect(try await f.store.keyCheck()?.keyID == made.masterKeyID)
            #expect(FileManager.default.fileExists(atPath: "\(directory)/authority.key"))

            // The same store seen from a fresh state directory: it holds a check, so it holds data.
            let fresh = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: fresh) }
            let error = try #require(
                await rainError {
                    _ = try await StoreKeyBinding.keys(stateDirectory: fresh, store: f.store, logger: Self.logger)
                })
            #expect(error.code == .invalidArgument)
            #expect(error.details.reason == "master_key_missing")
            #expect(error.message.contains(made.masterKeyID))
            #expect(!FileManager.default.fileExists(atPath: "\(fresh)/authority.key"))
        }
    }

    @Test(
        "without authority.key, a store with accounts and no check yet is refused too, and no key file is made",
        arguments: kinds)
    func missingKeyFileBesideAccounts(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            _ = try await f.storeLogin()
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let error = try #require(
                await rainError {
                    _ = try await StoreKeyBinding.keys(stateDirectory: directory, store: f.store, logger: Self.logger)
                })
            #expect(error.details.reason == "master_key_missing")
            #expect(!FileManager.default.fileExists(atPath: "\(directory)/authority.key"))
            #expect(try await f.store.keyCheck() == nil)
        }
    }

    @Test(
        "instances starting together on an empty store record exactly one check, which the others then match or refuse",
        arguments: kinds)
    func concurrentFirstStarts(kind: StoreKind) async throws {
        try await StoreFixture.with(kind, instances: 4) { f in
            let keys = try Self.keys(5)
            let proposed = StoreKeyCheck(keyID: keys.masterKeyID, value: keys.storeKeyCheck)
            let outcomes = try await withThrowingTaskGroup(of: StoreKeyCheckOutcome.self) { group in
                for store in f.stores { group.addTask { try await store.recordKeyCheck(proposed, at: Date()) } }
                return try await group.reduce(into: [StoreKeyCheckOutcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .recorded }.count == 1)
            #expect(outcomes.filter { $0 == .existing(proposed) }.count == 3)
        }
    }
}
