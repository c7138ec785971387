// Defines Answer too, and Other, which the application needs: its Answer is made local.
int Answer(void) { return 1; }
int Other(int x) { return x + 10; }
