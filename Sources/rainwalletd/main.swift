import Foundation
import RainDaemon

exit(Daemon.main(Array(CommandLine.arguments.dropFirst())))
