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
    public static let listApps = "/rain.wallet.v1.Apps/List"
    public static let approveApp = "/rain.wallet.v1.Apps/Approve"
    public static let revokeApp = "/rain.wallet.v1.Apps/Revoke"
    public static let getSettings = "/rain.wallet.v1.Settings/Get"
    public static let confirmSettings = "/rain.wallet.v1.Settings/Confirm"
    public static let registerPrompt = "/rain.wallet.v1.Prompt/Register"
    // The daemon's keys (`rainwallet storage …`): the daemon's own uid only.
    public static let storageStatus = "/rain.wallet.v1.Storage/GetStatus"
    public static let storageBackup = "/rain.wallet.v1.Storage/Backup"
    public static let storageMigrate = "/rain.wallet.v1.Storage/Migrate"
    public static let slowEcho = "/rain.wallet.v1.Test/SlowEcho"
}

/// The protocol version reported by GetInfo. Bumped only for incompatible changes (never so far).
public let protocolVersion: UInt32 = 1
