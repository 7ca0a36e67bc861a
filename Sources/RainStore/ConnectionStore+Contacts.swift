import FoundationEssentials
import RainAuthorityAPI
import RainCore
import RainWire

// Backup contacts: who owns a contact, and attaching a verified one to an account.
extension ConnectionStore {
    /// The account of `appID` that owns `contact`, or nil.
    package func contactOwner(appID: String, contact: RainWalletContact) async throws(RainError) -> String? {
        try await perform { db throws(RainError) in try StoreOperations.accountID(db, appID: appID, contact: contact) }
    }

    /// Completes a contact verification (see `AuthorityStore.completeContactVerification`); in
    /// one transaction. In PostgreSQL a concurrent attach of the same contact is a unique
    /// violation, after which the transaction runs again and finds the owner.
    package func completeContactVerification(_ v: ContactVerificationCompletion) async throws(RainError)
        -> ContactVerificationOutcome
    {
        try await perform { db throws(RainError) in
            try db.transaction("complete a contact verification") { () throws(RainError) -> ContactVerificationOutcome in
                if let early: ContactVerificationOutcome = try StoreOperations.confirmCode(
                    db, challengeID: v.challengeID, appID: v.appID, deviceID: v.deviceID, contact: v.contact,
                    purpose: .verifyContact, targetAccountID: v.accountID, idempotency: v.idempotency, now: v.now)
                {
                    return early
                }
                let now = v.now.unixMilliseconds
                // Checked again here: another account may have taken the contact since the send.
                if let owner = try StoreOperations.accountID(db, appID: v.appID, contact: v.contact) {
                    guard owner == v.accountID else {
                        try db.execute(
                            "UPDATE challenges SET state = 'retired' WHERE id = $1", values: [.text(v.challengeID)],
                            operation: "retire the verification challenge")
                        return .ownedByAnotherAccount
                    }
                    try db.execute(
                        """
                        UPDATE contacts SET verified_at = COALESCE(verified_at, $1)
                        WHERE app_id = $2 AND kind = $3 AND value = $4
                        """,
                        values: [.integer(now), .text(v.appID), .text(v.contact.kindName), .text(v.contact.value)],
                        operation: "mark the contact verified")
                    try StoreOperations.recordContactVerification(db, v)
                    return .verified(wasAlreadyAttached: true)
                }
                try db.execute(
                    "INSERT INTO contacts (app_id, kind, value, account_id, verified_at) VALUES ($1, $2, $3, $4, $5)",
                    values: [
                        .text(v.appID), .text(v.contact.kindName), .text(v.contact.value), .text(v.accountID), .integer(now),
                    ], operation: "attach the verified contact to the account")
                // Login codes sent to the contact before it had an account now count against this one.
                try db.execute(
                    """
                    UPDATE challenges SET account_key = $1
                    WHERE app_id = $2 AND account_key = $3 AND state = 'pending'
                    """,
                    values: [.text(v.accountID), .text(v.appID), .text(StoreOperations.contactKey(v.contact))],
                    operation: "move the contact's pending challenges to the account")
                try StoreOperations.recordContactVerification(db, v)
                return .verified(wasAlreadyAttached: false)
            }
        }
    }
}
