// Interposition by symbol: the first Answer in search order, which the application uses.
int Answer(void) { return 2; }
