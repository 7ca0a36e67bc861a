import Foundation
import RainCLI

exit(await CLI.main(Array(CommandLine.arguments.dropFirst())))
