/// Full method names (gRPC form). See proto/PROTOCOL.md for each one's messages and errors.
public enum Method {
    public static let getInfo = "/rain.wallet.v1.Daemon/GetInfo"
    public static let sendLoginCode = "/rain.wallet.v1.Auth/SendLoginCode"
    public static let confirmLoginCode = "/rain.wallet.v1.Auth/ConfirmLoginCode"
    public static let logout = "/rain.wallet.v1.Auth/Logout"
    public static let getSessionState = "/rain.wallet.v1.Session/GetState"
    public static let awaitRestore = "/rain.wallet.v1.Session/AwaitRestore"
    public static let watch = "/rain.wallet.v1.Session/Watch"
    public static let refreshSession = "/rain.wallet.v1.Session/Refresh"
    public static let getAccount = "/rain.wallet.v1.Account/Get"
    public static let getWallet = "/rain.wallet.v1.Wallet/Get"
    public static let exportRecoveryPhrase = "/rain.wallet.v1.Wallet/ExportRecoveryPhrase"
    public static let exportPrivateKey = "/rain.wallet.v1.Wallet/ExportPrivateKey"
    public static let configureProfile = "/rain.wallet.v1.Profile/Configure"
    public static let passkeyBeginSignUp = "/rain.wallet.v1.Passkey/BeginSignUp"
    public static let passkeyBeginLogin = "/rain.wallet.v1.Passkey/BeginLogin"
    public static let passkeyBeginAdd = "/rain.wallet.v1.Passkey/BeginAdd"
    public static let passkeyFinish = "/rain.wallet.v1.Passkey/Finish"
    public static let passkeyCancel = "/rain.wallet.v1.Passkey/Cancel"
    public static let contactSendVerificationCode = "/rain.wallet.v1.Contact/SendVerificationCode"
    public static let contactConfirmVerification = "/rain.wallet.v1.Contact/ConfirmVerification"
    public static let readAuditLog = "/rain.wallet.v1.Audit/Read"
    public static let listOutbox = "/rain.wallet.v1.Dev/ListOutbox"
    public static let slowEcho = "/rain.wallet.v1.Test/SlowEcho"
}

/// The protocol version reported by GetInfo. Bumped only for incompatible changes (never so far).
public let protocolVersion: UInt32 = 1
