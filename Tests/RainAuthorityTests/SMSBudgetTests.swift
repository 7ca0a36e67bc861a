import Foundation
import RainAuthorityAPI
import RainCore
import RainTestSupport
import Testing

@testable import RainAuthority
@testable import RainStore

/// The hourly SMS budget kept in the authority's store: shared by every sender and
/// every authority instance on the store, kept across restarts, given back when the gateway
/// refused, exact under concurrency on PostgreSQL, pruned once out of its window.
@Suite("SMS budget in the store")
struct SMSBudgetTests {
    typealias Setup = SMSCodeSenderTests.Setup

    static func message() -> CodeMessage { SMSCodeSenderTests.message() }

    static func sender(
        _ s: Setup, _ server: GatewayTestServer, budget: Int, store: any AuthorityStore, clock: ManualClock
    ) throws -> SMSCodeSender {
        try SMSCodeSender(
            settings: s.webhook(server, budget: budget), budget: StoreSMSBudget(store: store), clock: clock, logger: s.logger)
    }

    @Test("SQLite: two senders on one store share the budget, and a restart (a new store and sender) keeps it")
    func sharedAndKeptOnSQLite() async throws {
        try await Setup.with { s in
            try await s.server { server in
                let clock = ManualClock()
                let directory = "\(s.directory)/authority"
                let store = try await SQLiteAuthorityStore.open(stateDirectory: directory)
                let first = try Self.sender(s, server, budget: 2, store: store, clock: clock)
                let second = try Self.sender(s, server, budget: 2, store: store, clock: clock)
                try await first.deliver(Self.message())
                clock.advance(by: .seconds(600))
                try await second.deliver(Self.message())
                let error = await rainError { try await first.deliver(Self.message()) }
                #expect(error?.code == .refused)
                #expect(error?.details.reason == "sms_budget")
                #expect(error?.details.limit == "sms_budget")
                // The first slot leaves the window an hour after it was taken: 50 min from now.
                #expect(error?.details.retryAfterMilliseconds == 3_000_000)
                #expect(try server.requests().count == 2)
                await store.close()

                // A restart: a new store and a new sender on the same file start from what was spent.
                let reopened = try await SQLiteAuthorityStore.open(stateDirectory: directory)
                let restarted = try Self.sender(s, server, budget: 2, store: reopened, clock: clock)
                let again = await rainError { try await restarted.deliver(Self.message()) }
                #expect(again?.code == .refused)
                #expect(again?.details.retryAfterMilliseconds == 3_000_000)
                #expect(try server.requests().count == 2)
                clock.advance(by: .seconds(3000))
                try await restarted.deliver(Self.message())
                #expect(try server.requests().count == 3)
                await reopened.close()
            }
        }
    }

    @Test("SQLite: a slot the gateway refused is given back to the store; one that may have arrived is not")
    func givenBackOnSQLite() async throws {
        try await Setup.with { s in
            let clock = ManualClock()
            let store = try await SQLiteAuthorityStore.open(stateDirectory: "\(s.directory)/authority")
            try await s.server(mode: "status-503") { server in
                let sender = try Self.sender(s, server, budget: 1, store: store, clock: clock)
                #expect(await rainError { try await sender.deliver(Self.message()) }?.code == .network)
                #expect(await rainError { try await sender.deliver(Self.message()) }?.code == .network)
                #expect(try server.requests().count == 2)
            }
            // The budget of 1 is still whole: another sender on the store gets it.
            try await s.server { server in
                let sender = try Self.sender(s, server, budget: 1, store: store, clock: clock)
                try await sender.deliver(Self.message())
                #expect(await rainError { try await sender.deliver(Self.message()) }?.details.reason == "sms_budget")
                #expect(try server.requests().count == 1)
            }
            await store.close()
            // No answer after the hand-off: it may have arrived, the slot stays spent.
            let other = try await SQLiteAuthorityStore.open(stateDirectory: "\(s.directory)/other")
            try await s.server(mode: "hang") { server in
                let sender = try SMSCodeSender(
                    settings: s.webhook(server, budget: 1, timeout: .seconds(2)), budget: StoreSMSBudget(store: other),
                    clock: clock, logger: s.logger)
                #expect(await rainError { try await sender.deliver(Self.message()) }?.code == .provider)
                #expect(await rainError { try await sender.deliver(Self.message()) }?.details.reason == "sms_budget")
            }
            await other.close()
        }
    }

    @Test("a store that cannot count the budget is a RAIN_301 refusal (the send-limit slot comes back); nothing is sent")
    func storeUnavailable() async throws {
        try await Setup.with { s in
            try await s.server { server in
                let store = try await SQLiteAuthorityStore.open(stateDirectory: "\(s.directory)/authority")
                await store.close()
                let sender = try Self.sender(s, server, budget: 5, store: store, clock: ManualClock())
                let error = await rainError { try await sender.deliver(Self.message()) }
                #expect(error?.code == .network)
                #expect(error?.details.reason == CodeDeliveryFailure.unavailableReason)
                #expect(try server.requests().isEmpty)
            }
        }
    }

    @Test(
        "the store's budget: exactly limit slots in a window, retry when the oldest counted one leaves, given back, pruned",
        arguments: StoreKind.allCases)
    func storeBudget(kind: StoreKind) async throws {
        try await StoreFixture.with(kind) { f in
            let budget = StoreSMSBudget(store: f.store)
            let window = SMSCodeSender.budgetWindow
            let start = f.clock.now
            var slots: [SMSBudgetSlot] = []
            for minute in [0, 10, 20] {
                guard
                    case .taken(let slot) = try await budget.take(
                        limit: 3, window: window, now: start.addingTimeInterval(Double(minute * 60)))
                else {
                    Issue.record("slot \(minute) refused")
                    return
                }
                slots.append(slot)
            }
            let late = start.addingTimeInterval(30 * 60)
            #expect(
                try await budget.take(limit: 3, window: window, now: late) == .full(retryAfter: start.addingTimeInterval(3600)))
            // A lower limit waits for more of them to leave.
            #expect(
                try await budget.take(limit: 2, window: window, now: late) == .full(retryAfter: start.addingTimeInterval(4200)))
            // Given back: room again.
            try await budget.giveBack(slots[1])
            guard case .taken = try await budget.take(limit: 3, window: window, now: late) else {
                Issue.record("the given-back slot was not freed")
                return
            }
            #expect(
                try await budget.take(limit: 3, window: window, now: late) == .full(retryAfter: start.addingTimeInterval(3600)))
            // An hour after the first: it left the window, and the periodic prune deletes it.
            f.clock.advance(by: .seconds(3600 + 60))
            let pruned = try await f.authority.pruneExpired()
            #expect(pruned.smsSlotsDeleted == 1)
            #expect(try await budget.take(limit: 3, window: window, now: f.clock.now).isTaken)
        }
    }

    @Test("PostgreSQL: two authority instances share one budget, exactly, even when they take slots at once")
    func sharedOnPostgres() async throws {
        try await StoreFixture.with(.postgres, instances: 2) { f in
            let window = SMSCodeSender.budgetWindow
            let budgets = f.stores.map { StoreSMSBudget(store: $0) }
            let now = f.clock.now
            // 48 takes at once, half through each instance (each with its pool of connections).
            let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<48 {
                    group.addTask { try await budgets[i % 2].take(limit: 5, window: window, now: now).isTaken }
                }
                var count = 0
                for try await isTaken in group where isTaken { count += 1 }
                return count
            }
            #expect(taken == 5)
            #expect(try await budgets[1].take(limit: 5, window: window, now: now) == .full(retryAfter: now.adding(window)))
        }
        // Through the senders: a message sent by one instance counts against the other's.
        try await Setup.with { s in
            try await s.server { server in
                try await StoreFixture.with(.postgres, instances: 2) { f in
                    let first = try Self.sender(s, server, budget: 1, store: f.stores[0], clock: f.clock)
                    let second = try Self.sender(s, server, budget: 1, store: f.stores[1], clock: f.clock)
                    try await first.deliver(Self.message())
                    let error = await rainError { try await second.deliver(Self.message()) }
                    #expect(error?.code == .refused)
                    #expect(error?.details.reason == "sms_budget")
                    #expect(error?.details.retryAfterMilliseconds == 3_600_000)
                    #expect(try server.requests().count == 1)
                }
            }
        }
    }
}

extension SMSBudgetOutcome {
    var isTaken: Bool {
        if case .taken = self { return true }
        return false
    }
}
