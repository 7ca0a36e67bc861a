import Foundation
import RainDevice

exit(Daemon.main(Array(CommandLine.arguments.dropFirst())))
