import RainAccess
import RainCore

/// Where the prompt places' history is kept: the sealed approvals record, written by `AppAccess`
/// alone (two writers of one file would undo each other's changes).
public protocol PromptPlaceHistoryKeeping: Sendable {
    /// The history; nil before the first place.
    var promptPlaceHistory: PromptPlaceHistory? { get }
    /// Records `history` (durably, before it returns).
    /// - Throws: RAIN_502 when the record cannot be written (nothing changes).
    func recordPromptPlaceHistory(_ history: PromptPlaceHistory) throws(RainError)
}

extension AppAccess: PromptPlaceHistoryKeeping {
    public var promptPlaceHistory: PromptPlaceHistory? { state.withLock { $0.approvals.promptPlaces } }

    public func recordPromptPlaceHistory(_ history: PromptPlaceHistory) throws(RainError) {
        try update { (approvals) throws(RainError) in approvals.promptPlaces = history }
    }
}
