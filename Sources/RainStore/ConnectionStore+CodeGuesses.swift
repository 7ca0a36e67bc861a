import FoundationEssentials
import RainAuthorityAPI
import RainCore

// The wrong-guess budgets: one row per code checked in `code_guesses`, given back when the code was
// right, counted per device key and per source across every app and account. Kept in the store
// so the instances sharing it spend one budget and a restart does not refill it.
extension ConnectionStore {
    /// Takes a guess slot unless a budget is spent (see `AuthorityStore.reserveCodeGuess`).
    package func reserveCodeGuess(_ guess: NewCodeGuess, limits: CodeSendLimits) async throws(RainError)
        -> CodeGuessReservation
    {
        try await perform { db throws(RainError) in
            try db.transaction("reserve a code guess") { () throws(RainError) -> CodeGuessReservation in
                try StoreOperations.reserveCodeGuess(db, guess, limits: limits)
            }
        }
    }

    /// Gives a guess slot back (see `AuthorityStore.releaseCodeGuess`).
    package func releaseCodeGuess(id: String) async throws(RainError) {
        try await perform { db throws(RainError) -> Void in
            try db.execute("DELETE FROM code_guesses WHERE id = $1", values: [.text(id)], operation: "give back a code guess")
        }
    }
}

extension StoreOperations {
    /// Counts and stores a guess (see `AuthorityStore.reserveCodeGuess`); in the caller's transaction.
    static func reserveCodeGuess<DB: StoreConnection>(_ db: DB, _ guess: NewCodeGuess, limits: CodeSendLimits)
        throws(RainError) -> CodeGuessReservation
    {
        // Always source, then device key: two checks never deadlock. Advisory locks, not row
        // locks: an empty window has no row to lock (see `takeSMSSlot`).
        try db.lock("guess-source", guess.source)
        try db.lock("guess-device-key", guess.deviceKey)
        let now = guess.guessedAt.unixMilliseconds
        var refusals: [(limit: CodeGuessLimit, retryAfter: Int64)] = []
        if let clears = try guessClearance(
            db, column: "device_key", value: guess.deviceKey, now: now, window: limits.guessWindow,
            maxGuesses: limits.deviceKeyMaxWrongGuesses, operation: "count the device key's wrong guesses")
        {
            refusals.append((.deviceKeyGuessWindow, clears))
        }
        if let clears = try guessClearance(
            db, column: "source", value: guess.source, now: now, window: limits.guessWindow,
            maxGuesses: limits.sourceMaxWrongGuesses, operation: "count the source's wrong guesses")
        {
            refusals.append((.sourceGuessWindow, clears))
        }
        if let latest = refusals.max(by: { $0.retryAfter < $1.retryAfter }) {
            return .limited(latest.limit, retryAfter: Date(unixMilliseconds: latest.retryAfter))
        }
        try db.execute(
            "INSERT INTO code_guesses (id, device_key, source, guessed_at) VALUES ($1, $2, $3, $4)",
            values: [.text(guess.id), .text(guess.deviceKey), .text(guess.source), .integer(now)],
            operation: "reserve a code guess")
        return .reserved
    }

    /// When enough of the guesses with `column` = `value` within `window` before `now` have left it
    /// for one more to fit under `maxGuesses` (Unix ms), or nil when one more fits now.
    private static func guessClearance(
        _ db: some StoreConnection, column: String, value: String, now: Int64, window: Duration, maxGuesses: Int,
        operation op: String
    ) throws(RainError) -> Int64? {
        guard window > .zero, maxGuesses < Int.max else { return nil }
        let windowMilliseconds = window.milliseconds
        // A guess at `t` counts while `now < t + window`.
        let rows = try db.query(
            """
            SELECT guessed_at FROM code_guesses WHERE \(column) = $1 AND guessed_at > $2 AND guessed_at <= $3
            ORDER BY guessed_at
            """,
            values: [.text(value), .integer(now - windowMilliseconds), .integer(now)], operation: op)
        let allowed = max(0, maxGuesses)
        guard rows.count >= allowed else { return nil }
        guard allowed > 0 else { return now + windowMilliseconds }
        // One more fits once all but `allowed - 1` of the counted guesses have left the window.
        return try rows[rows.count - allowed].integer(0, op) + windowMilliseconds
    }
}
