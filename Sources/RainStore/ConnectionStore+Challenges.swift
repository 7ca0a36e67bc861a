import FoundationEssentials
import Glibc
import RainAuthorityAPI
import RainCore
import RainWire

// Login challenges: sending one under the send limits, a wrong code, retiring one.
extension ConnectionStore {
    /// Records a pending challenge unless a send limit refuses it (see
    /// `AuthorityStore.insertChallenge`), in one transaction. The device's, the contact's
    /// and the account key's locks are held from the count to the insert, so concurrent sends
    /// never both take the last free slot.
    package func insertChallenge(_ challenge: NewChallenge, maxActivePerAccount: Int, limits: CodeSendLimits)
        async throws(RainError) -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("record a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                let outcome = try StoreOperations.reserveChallenge(db, challenge, limits: limits)
                guard case .inserted(let reserved) = outcome else { return outcome }
                let retired = try StoreOperations.activateChallenge(
                    db, id: challenge.id, maxActivePerAccount: maxActivePerAccount)
                return .inserted(ChallengeInsertion(accountKey: reserved.accountKey, retiredChallengeIDs: retired))
            }
        }
    }

    /// Reserves a challenge's send-limit slot (see `AuthorityStore.reserveChallenge`), in one transaction.
    package func reserveChallenge(_ challenge: NewChallenge, limits: CodeSendLimits) async throws(RainError)
        -> ChallengeInsertionOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("reserve a login challenge") { () throws(RainError) -> ChallengeInsertionOutcome in
                try StoreOperations.reserveChallenge(db, challenge, limits: limits)
            }
        }
    }

    /// Makes a reservation pending (see `AuthorityStore.activateChallenge`), in one transaction.
    package func activateChallenge(id: String, maxActivePerAccount: Int) async throws(RainError) -> [String] {
        try await perform { db throws(RainError) in
            try db.transaction("activate a delivered challenge") { () throws(RainError) -> [String] in
                try StoreOperations.activateChallenge(db, id: id, maxActivePerAccount: maxActivePerAccount)
            }
        }
    }

    /// Gives a reserved challenge's send-limit slot back: the provider refused its code before
    /// accepting it, so nobody can have received it. Deletes the row only while it is still a
    /// reservation (retired, never tried).
    package func releaseChallenge(id: String) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
            try db.execute(
                "DELETE FROM challenges WHERE id = $1 AND state = 'retired' AND wrong_attempts = 0", values: [.text(id)],
                operation: "give back a refused challenge's slot")
        }
    }

    /// The challenge with this id, whatever its state.
    package func challenge(id: String) async throws(RainError) -> ChallengeRecord? {
        try await perform { db throws(RainError) in try StoreOperations.challenge(db, id: id) }
    }

    /// The retired, unexpired challenges of one app on one device (`AuthorityStore.retiredChallenges`).
    package func retiredChallenges(
        appID: String, deviceID: String, purpose: ChallengePurpose, now: Date, limit: Int
    ) async throws(RainError) -> [ChallengeRecord] {
        try await perform { db throws(RainError) in
            try StoreOperations.retiredChallenges(
                db, appID: appID, deviceID: deviceID, purpose: purpose, now: now, limit: limit)
        }
    }

    /// Retires a challenge if it is still pending.
    package func retireChallenge(id: String) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
            try db.execute(
                "UPDATE challenges SET state = 'retired' WHERE id = $1 AND state = 'pending'", values: [.text(id)],
                operation: "retire a challenge")
        }
    }

    /// Counts a wrong code, locking at `maxWrongAttempts`: one conditional `UPDATE` (which the
    /// challenge's row lock serializes in PostgreSQL), then the challenge as it is now; in
    /// one transaction.
    package func recordWrongAttempt(challengeID: String, maxWrongAttempts: Int, now: Date) async throws(RainError)
        -> ChallengeRecord?
    {
        try await perform { db throws(RainError) in
            try db.transaction("count a wrong code") { () throws(RainError) -> ChallengeRecord? in
                try db.execute(
                    """
                    UPDATE challenges
                    SET wrong_attempts = wrong_attempts + 1,
                        state = CASE WHEN wrong_attempts + 1 >= $1 THEN 'locked' ELSE state END
                    WHERE id = $2 AND state = 'pending' AND expires_at > $3
                    """,
                    values: [.integer(Int64(max(1, maxWrongAttempts))), .text(challengeID), .integer(now.unixMilliseconds)],
                    operation: "count a wrong code")
                return try StoreOperations.challenge(db, id: challengeID)
            }
        }
    }
}
