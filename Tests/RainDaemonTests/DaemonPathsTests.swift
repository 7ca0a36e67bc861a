import Foundation
@testable import RainDaemon
import Testing

@Suite struct DaemonPathsTests {
    @Test func defaultsFollowXDG() {
        let p = DaemonPaths.resolve(environment: [
            "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c", "HOME": "/home/u",
        ])
        #expect(p.socket == "/run/user/1000/rainwallet/rainwalletd.sock")
        #expect(p.stateDirectory == "/s/rainwallet")
        #expect(p.config == "/c/rainwallet/config.json")
        #expect(!p.isConfigExplicit)
    }

    @Test func fallbacksWithoutXDG() {
        let p = DaemonPaths.resolve(environment: ["HOME": "/home/u"])
        #expect(p.socket == "/tmp/rainwallet-\(getuid())/rainwalletd.sock")
        #expect(p.stateDirectory == "/home/u/.local/state/rainwallet")
        #expect(p.config == "/home/u/.config/rainwallet/config.json")
    }

    @Test func flagsOverride() {
        let p = DaemonPaths.resolve(environment: [:], socket: "/x.sock", stateDirectory: "/st", config: "/cf.json")
        #expect(p == DaemonPaths(socket: "/x.sock", stateDirectory: "/st", config: "/cf.json", isConfigExplicit: true))
    }
}
