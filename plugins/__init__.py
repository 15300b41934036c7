"""Built-in optimizer plugins, registered through the ``crfopt_register_optimizers`` hook."""
