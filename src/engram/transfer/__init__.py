"""Moving banks in and out: Hindsight 1.1.0's transfer ZIP archive, written from a bank (export),
read into a bank (import, restore or merge), and both back to back (clone)."""
