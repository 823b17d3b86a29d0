//! `quiver user add NAME --db DIR`: a user of the Bolt server, with a salted Argon2id
//! hash of the password in the database folder.

use anyhow::{bail, Result};
use quiver_bolt::Users;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(clap::Subcommand)]
pub enum Action {
    /// Add a user (or set a user's password). The password is read from the terminal
    /// without echo, or from the first line of standard input when it is not one.
    Add {
        name: String,
        #[arg(long)]
        db: PathBuf,
    },
    /// List the users.
    List {
        #[arg(long)]
        db: PathBuf,
    },
}

pub fn run(a: Args) -> Result<()> {
    match a.action {
        Action::Add { name, db } => {
            if !db.is_dir() {
                bail!("{} is not a database folder", db.display());
            }
            let password = if std::io::stdin().is_terminal() {
                let p = rpassword::prompt_password(format!("password for {name}: "))?;
                let again = rpassword::prompt_password("again: ")?;
                if p != again {
                    bail!("the passwords differ; nothing was changed");
                }
                p
            } else {
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line)?;
                line.trim_end_matches(['\r', '\n']).to_string()
            };
            Users::set(&db, &name, &password)?;
            eprintln!("user {name} saved in {}", Users::path(&db).display());
        }
        Action::List { db } => {
            for n in Users::load(&db)?.names() {
                println!("{n}");
            }
        }
    }
    Ok(())
}
