internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for wallet.proto's enums whose Swift types are closed, hand-written enums
// (RainChain and ExpiryReason of RainCore, WatchEvent.Kind): generated messages convert their
// fields with these (the generator's HAND_WRITTEN table names them). A number this build does not
// know reads as nil, or as `.authState` for an event's kind (the watcher then rereads the state).

func cChain(_ chain: RainChain?) -> Rain__Wallet__V1__Chain {
    switch chain {
    case .ethereum: RAIN__WALLET__V1__CHAIN__CHAIN_ETHEREUM
    case .solana: RAIN__WALLET__V1__CHAIN__CHAIN_SOLANA
    case nil: RAIN__WALLET__V1__CHAIN__CHAIN_UNSPECIFIED
    }
}

func readChain(_ chain: Rain__Wallet__V1__Chain) -> RainChain? {
    switch chain {
    case RAIN__WALLET__V1__CHAIN__CHAIN_ETHEREUM: .ethereum
    case RAIN__WALLET__V1__CHAIN__CHAIN_SOLANA: .solana
    default: nil
    }
}

func cExpiryReason(_ reason: ExpiryReason?) -> Rain__Wallet__V1__ExpiryReason {
    switch reason {
    case .expired: RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_EXPIRED
    case .revokedElsewhere: RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REVOKED_ELSEWHERE
    case .refreshFailed: RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REFRESH_FAILED
    case nil: RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_UNSPECIFIED
    }
}

func readExpiryReason(_ reason: Rain__Wallet__V1__ExpiryReason) -> ExpiryReason? {
    switch reason {
    case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_EXPIRED: .expired
    case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REVOKED_ELSEWHERE: .revokedElsewhere
    case RAIN__WALLET__V1__EXPIRY_REASON__EXPIRY_REASON_REFRESH_FAILED: .refreshFailed
    default: nil
    }
}

func cEventType(_ kind: WatchEvent.Kind) -> Rain__Wallet__V1__EventType {
    switch kind {
    case .authState: RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTH_STATE
    case .sessionState: RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_STATE
    case .sessionExpired: RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_EXPIRED
    case .authorityLink: RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTHORITY_LINK
    case .storage: RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_STORAGE
    }
}

func readEventType(_ type: Rain__Wallet__V1__EventType) -> WatchEvent.Kind {
    switch type {
    case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_STATE: .sessionState
    case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_SESSION_EXPIRED: .sessionExpired
    case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_AUTHORITY_LINK: .authorityLink
    case RAIN__WALLET__V1__EVENT_TYPE__EVENT_TYPE_STORAGE: .storage
    default: .authState
    }
}
