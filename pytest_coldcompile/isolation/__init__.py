"""Process isolation, the parent's side: the engine that runs one child per cold test, the three
ways a child starts (fork server, zygote, spawn), process helpers, the record files a child
leaves, and the pytest reports made from them."""
