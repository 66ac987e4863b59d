// placeholder: being written (MPI communicator test, run under mpirun by ctest)
int main() { return 0; }
