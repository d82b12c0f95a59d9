import ShrinkCLI

#if canImport(Glibc)
import Glibc
#endif

exit(ShrinkCommandLine.run(Array(CommandLine.arguments.dropFirst())))
