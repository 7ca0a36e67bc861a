import Foundation
import RainCore

/// Backup contacts (schema version 5): verification challenges and attaching a verified contact.
extension SQLiteAuthorityStore {
    /// The account of `appID` that owns `contact`, or nil.
    public func contactOwner(appID: String, contact: RainWalletContact) async throws(RainError) -> String? {
        try await perform { db throws(RainError) in try Self.accountID(db, appID: appID, contact: contact) }
    }

    /// Completes a contact verification (see `AuthorityStore.completeContactVerification`), in one
    /// transaction.
    public func completeContactVerification(_ v: ContactVerificationCompletion) async throws(RainError)
        -> ContactVerificationOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("complete a contact verification") { () throws(RainError) -> ContactVerificationOutcome in
                let now = v.now.unixMilliseconds
                let used = try db.execute(
                    """
                    UPDATE challenges SET state = 'used'
                    WHERE id = ? AND app_id = ? AND device_id = ? AND purpose = 'verify_contact'
                      AND target_account_id = ? AND state = 'pending' AND expires_at > ?
                    """,
                    [.text(v.challengeID), .text(v.appID), .text(v.deviceID), .text(v.accountID), .integer(now)],
                    operation: "mark the verification challenge used")
                guard used == 1 else {
                    return .challengeUnavailable(try Self.challenge(db, id: v.challengeID))
                }
                // Checked again here: another account may have taken the contact since the send.
                if let owner = try Self.accountID(db, appID: v.appID, contact: v.contact) {
                    guard owner == v.accountID else {
                        try db.execute(
                            "UPDATE challenges SET state = 'retired' WHERE id = ?", [.text(v.challengeID)],
                            operation: "retire the verification challenge")
                        return .ownedByAnotherAccount
                    }
                    try db.execute(
                        """
                        UPDATE contacts SET verified_at = COALESCE(verified_at, ?)
                        WHERE app_id = ? AND kind = ? AND value = ?
                        """,
                        [.integer(now), .text(v.appID), .text(v.contact.kindName), .text(v.contact.value)],
                        operation: "mark the contact verified")
                    return .verified(wasAlreadyAttached: true)
                }
                try db.execute(
                    "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(v.appID), .text(v.contact.kindName), .text(v.contact.value), .text(v.accountID),
                        .integer(now),
                    ], operation: "attach the verified contact to the account")
                // Login codes sent to the contact before it had an account now count against this one.
                try db.execute(
                    """
                    UPDATE challenges SET account_key = ?
                    WHERE app_id = ? AND account_key = ? AND state = 'pending'
                    """,
                    [.text(v.accountID), .text(v.appID), .text(Self.contactKey(v.contact))],
                    operation: "move the contact's pending challenges to the account")
                return .verified(wasAlreadyAttached: false)
            }
        }
    }
}
