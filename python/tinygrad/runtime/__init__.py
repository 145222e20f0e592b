# The device runtimes: ops_<name>.py defines <Name>Device for Device["<NAME>"].
